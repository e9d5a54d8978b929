/*
 * kubetray-exec's fast path: a cached credential without starting Python (as Mercurial's chg).
 *
 * Starting the bundle's Python costs about 10 ms per kubectl command, and most commands need
 * only a credential the agent already holds in memory. So before Python starts, the launcher
 * sends the agent one `cached_credential` request carrying exactly the fields the Python
 * helper sends for `get_credential`; the agent answers it ("answered": true) only when it can
 * at once, from memory: no login, prompt, message, store read, refresh or consent question.
 * This prints that answer as the Python helper's print_answer would, and exits.
 *
 * Whenever anything is not exactly as expected (the socket, its owner, the peer, a frame, the
 * JSON, an argument) it writes nothing and returns -1: the launcher then starts Python, which
 * does everything as before, every error message included. So no error is worded here, and
 * the only thing ever written is the agent's answer.
 *
 * Constants come from kt_protocol.h, which packaging/build.py generates from exec_helper.
 * Linux is built and tested here. The macOS branches (getpeereid, SO_NOSIGPIPE, no
 * SOCK_CLOEXEC) follow its man pages but have not been compiled. Windows never gets here.
 */
#ifdef __linux__
#define _GNU_SOURCE /* struct ucred */
#endif
#include "fast_path.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kt_protocol.h"

extern char **environ;

#ifdef MSG_NOSIGNAL
#define KT_SEND_FLAGS MSG_NOSIGNAL /* Linux: an agent that hung up must not kill us */
#else
#define KT_SEND_FLAGS 0 /* macOS: SO_NOSIGPIPE on the socket instead */
#endif
#define KT_MAX_ENV 256     /* relevant variables; more is not a real environment: use Python */

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* The length of the strict UTF-8 sequence at p (no overlongs, no surrogates, <= U+10FFFF),
 * or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    size_t left = (size_t)(end - p);
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0; /* a continuation byte, or an overlong 2-byte form */
    if (c < 0xE0) return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] >= 0xA0) return 0; /* UTF-16 surrogates */
        return 3;
    }
    if (c > 0xF4 || left < 4) return 0;
    if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && p[1] >= 0x90) return 0; /* beyond U+10FFFF */
    return 4;
}

static uint32_t utf8_decode(const unsigned char *p, size_t n) {
    if (n == 1) return p[0];
    if (n == 2) return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    if (n == 3) return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
           (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

static size_t utf8_encode(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Overwrite what held a credential or the caller's settings before it is freed: Python may
 * run next in this same process. */
static void wipe(void *p, size_t n) {
    volatile unsigned char *v = p;
    while (n--) *v++ = 0;
}

/* ---- The request ------------------------------------------------------------------------ */

/* The hello frame, the request frame and its JSON, as exec_helper.protocol.encode writes them
 * (compact, ASCII: Python's encode_basestring_ascii), so the agent reads one request format. */
#define KT_MAX_REQUEST (2 * KT_HEADER_SIZE + 64 + (size_t)KT_MAX_FRAME)

struct buf {
    char *data;
    size_t len, cap;
    int failed; /* out of memory, too large or not UTF-8: the request is not sent */
};

static void put(struct buf *b, const void *data, size_t n) {
    if (b->failed) return;
    if (n > KT_MAX_REQUEST - b->len) {
        b->failed = 1;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        if (cap > KT_MAX_REQUEST) cap = KT_MAX_REQUEST;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void put_text(struct buf *b, const char *text) { put(b, text, strlen(text)); }

static void put_int(struct buf *b, long long n) {
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%lld", n);
    put(b, digits, (size_t)len);
}

static void put_string(struct buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    put(b, "\"", 1);
    while (p < end && !b->failed) {
        const unsigned char *run = p; /* printable ASCII goes out as it is */
        while (p < end && *p >= ' ' && *p <= '~' && *p != '"' && *p != '\\') p++;
        put(b, run, (size_t)(p - run));
        if (p == end) break;
        size_t k = utf8_len(p, end);
        if (!k) {
            b->failed = 1; /* Python would send it surrogate-escaped: leave it to Python */
            return;
        }
        uint32_t cp = utf8_decode(p, k);
        p += k;
        char esc[2] = {'\\', 0};
        switch (cp) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        }
        if (esc[1]) {
            put(b, esc, 2);
            continue;
        }
        uint32_t units[2] = {cp, 0};
        size_t count = 1;
        if (cp >= 0x10000) { /* a UTF-16 surrogate pair, as JSON has it */
            units[0] = 0xD800 + ((cp - 0x10000) >> 10);
            units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
            count = 2;
        }
        for (size_t i = 0; i < count; i++) {
            char u[6] = {'\\', 'u', hex[units[i] >> 12 & 0xF], hex[units[i] >> 8 & 0xF],
                         hex[units[i] >> 4 & 0xF], hex[units[i] & 0xF]};
            put(b, u, sizeof u);
        }
    }
    put(b, "\"", 1);
}

static void put_key(struct buf *b, const char *key, int first) {
    if (!first) put(b, ",", 1);
    put_string(b, key, strlen(key));
    put(b, ":", 1);
}

static size_t frame_begin(struct buf *b) {
    size_t at = b->len;
    put(b, "\0\0\0\0", KT_HEADER_SIZE);
    return at;
}

static void frame_end(struct buf *b, size_t at) {
    if (b->failed) return;
    size_t n = b->len - at - KT_HEADER_SIZE;
    if (n > KT_MAX_FRAME) {
        b->failed = 1;
        return;
    }
    unsigned char *h = (unsigned char *)b->data + at;
    h[0] = (unsigned char)(n >> 24);
    h[1] = (unsigned char)(n >> 16);
    h[2] = (unsigned char)(n >> 8);
    h[3] = (unsigned char)n;
}

static int in_list(const char *const *list, const char *name, size_t n) {
    for (; *list; list++)
        if (strlen(*list) == n && memcmp(*list, name, n) == 0) return 1;
    return 0;
}

static int has_prefix(const char *const *list, const char *name, size_t n) {
    for (; *list; list++) {
        size_t p = strlen(*list);
        if (n >= p && memcmp(name, *list, p) == 0) return 1;
    }
    return 0;
}

/* Whether the variable is one exec_helper.paths.kubetray_env() passes to the agent: ours
 * (KUBETRAY_*), the cloud tools' (PASSED_ENV_PREFIXES) or one of PASSED_ENV; never INFRA_ENV. */
static int passed(const char *name, size_t n) {
    static const char *const infra[] = {KT_INFRA_ENV};
    static const char *const others[] = {KT_PASSED_ENV};
    static const char *const prefixes[] = {KT_ENV_PREFIX, KT_PASSED_PREFIXES};
    return (has_prefix(prefixes, name, n) || in_list(others, name, n)) &&
           !in_list(infra, name, n);
}

/* The passed variables in environ order. Python's posix.environ keeps the first of two
 * entries with one name (as getenv does), so a later duplicate is skipped. */
static void put_env(struct buf *b) {
    const char *seen[KT_MAX_ENV];
    size_t count = 0;
    put(b, "[", 1);
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !passed(*e, (size_t)(eq - *e))) continue;
        size_t n = (size_t)(eq - *e) + 1; /* the name and its '=' */
        int duplicate = 0;
        for (size_t i = 0; i < count && !duplicate; i++) duplicate = strncmp(seen[i], *e, n) == 0;
        if (duplicate) continue;
        if (count == KT_MAX_ENV) {
            b->failed = 1;
            return;
        }
        if (count) put(b, ",", 1);
        seen[count++] = *e;
        put_string(b, *e, strlen(*e));
    }
    put(b, "]", 1);
}

static int build_request(struct buf *b, int argc, char **argv) {
    size_t hello = frame_begin(b);
    put(b, "{", 1);
    put_key(b, KT_KEY_OP, 1);
    put_string(b, KT_OP_HELLO, strlen(KT_OP_HELLO));
    put_key(b, KT_KEY_VERSION, 0);
    put_int(b, KT_PROTOCOL_VERSION);
    put(b, "}", 1);
    frame_end(b, hello);

    size_t request = frame_begin(b);
    put(b, "{", 1);
    put_key(b, KT_KEY_OP, 1);
    put_string(b, KT_OP_CACHED_CREDENTIAL, strlen(KT_OP_CACHED_CREDENTIAL));
    const char *info = getenv(KT_EXEC_INFO_ENV);
    if (!info || !*info) info = KT_NO_EXEC_INFO;
    put_key(b, KT_KEY_EXEC_INFO, 0);
    put_string(b, info, strlen(info));
    put_key(b, KT_KEY_ARGS, 0);
    put(b, "[", 1);
    for (int i = 1; i < argc; i++) {
        if (i > 1) put(b, ",", 1);
        put_string(b, argv[i], strlen(argv[i]));
    }
    put(b, "]", 1);
    put_key(b, KT_KEY_ENV, 0);
    put_env(b);
    put_key(b, KT_KEY_STDIN_TTY, 0);
    put_text(b, isatty(0) ? "true" : "false");
    put_key(b, KT_KEY_STDERR_TTY, 0);
    put_text(b, isatty(2) ? "true" : "false");
    put_key(b, KT_KEY_PPID, 0);
    put_int(b, (long long)getppid());
    put(b, "}", 1);
    frame_end(b, request);
    return !b->failed;
}

/* ---- The agent's answer: two frames of flat JSON ---------------------------------------- */

enum kind { NONE, STRING, INT, TRUE, FALSE, NUL };

struct value {
    enum kind kind;
    const char *s; /* STRING: decoded UTF-8, n bytes */
    size_t n;
    long long i; /* INT */
};

/* The members a hello or result frame may carry; others are read and ignored. */
struct frame {
    struct value type, version, kubetray, exit, answered, out, err;
};

/* A reader over one frame's JSON. Decoded strings go to out, a buffer at least as large as the
 * input: no JSON string literal decodes to more bytes than it takes to write. */
struct json {
    const unsigned char *p, *end;
    char *out;
};

static void skip_ws(struct json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int eat(struct json *j, char c) {
    if (j->p < j->end && *j->p == (unsigned char)c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int literal(struct json *j, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return 0;
    j->p += n;
    return 1;
}

static int hex4(struct json *j, uint32_t *out) {
    if (j->end - j->p < 4) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static int read_string(struct json *j, struct value *v) {
    if (!eat(j, '"')) return 0;
    char *start = j->out;
    while (j->p < j->end) {
        unsigned char c = *j->p;
        if (c == '"') {
            j->p++;
            v->kind = STRING;
            v->s = start;
            v->n = (size_t)(j->out - start);
            return 1;
        }
        if (c < 0x20) return 0; /* raw control characters are not JSON */
        if (c != '\\') {
            size_t k = utf8_len(j->p, j->end);
            if (!k) return 0;
            memcpy(j->out, j->p, k);
            j->out += k;
            j->p += k;
            continue;
        }
        if (j->end - j->p < 2) return 0;
        unsigned char e = j->p[1];
        j->p += 2;
        uint32_t cp;
        switch (e) {
        case '"': case '\\': case '/': cp = e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (!hex4(j, &cp)) return 0;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return 0; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {         /* needs its low half next */
                uint32_t low;
                if (!literal(j, "\\u") || !hex4(j, &low) || low < 0xDC00 || low > 0xDFFF)
                    return 0;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            break;
        default: return 0;
        }
        j->out += utf8_encode(j->out, cp);
    }
    return 0; /* unterminated */
}

static int read_int(struct json *j, struct value *v) {
    int negative = eat(j, '-');
    const unsigned char *start = j->p;
    long long n = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (j->p - start >= 18) return 0; /* far beyond any exit code or version */
        n = n * 10 + (*j->p++ - '0');
    }
    size_t digits = (size_t)(j->p - start);
    if (digits == 0 || (digits > 1 && *start == '0')) return 0;
    v->kind = INT;
    v->i = negative ? -n : n;
    return 1;
}

/* A string, an integer, true, false or null: anything nested is refused. */
static int read_value(struct json *j, struct value *v) {
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '"': return read_string(j, v);
    case 't': v->kind = TRUE; return literal(j, "true");
    case 'f': v->kind = FALSE; return literal(j, "false");
    case 'n': v->kind = NUL; return literal(j, "null");
    default: return read_int(j, v);
    }
}

static int key_is(const struct value *key, const char *name) {
    return key->n == strlen(name) && memcmp(key->s, name, key->n) == 0;
}

static struct value *member(struct frame *f, const struct value *key) {
    if (key_is(key, KT_KEY_TYPE)) return &f->type;
    if (key_is(key, KT_KEY_VERSION)) return &f->version;
    if (key_is(key, KT_KEY_KUBETRAY)) return &f->kubetray;
    if (key_is(key, KT_KEY_EXIT)) return &f->exit;
    if (key_is(key, KT_FIELD_ANSWERED)) return &f->answered;
    if (key_is(key, KT_KEY_STDOUT)) return &f->out;
    if (key_is(key, KT_KEY_STDERR)) return &f->err;
    return NULL;
}

/* One flat JSON object filling f; 1 when it is exactly that and nothing more. */
static int read_object(const unsigned char *data, size_t len, char *out, struct frame *f) {
    struct json j = {data, data + len, out};
    memset(f, 0, sizeof *f);
    skip_ws(&j);
    if (!eat(&j, '{')) return 0;
    skip_ws(&j);
    if (!eat(&j, '}')) {
        for (;;) {
            struct value key, value;
            skip_ws(&j);
            if (!read_string(&j, &key)) return 0;
            skip_ws(&j);
            if (!eat(&j, ':')) return 0;
            skip_ws(&j);
            if (!read_value(&j, &value)) return 0;
            struct value *slot = member(f, &key);
            if (slot) *slot = value; /* a repeated key: the last one wins, as in Python */
            skip_ws(&j);
            if (eat(&j, '}')) break;
            if (!eat(&j, ',')) return 0;
        }
    }
    skip_ws(&j);
    return j.p == j.end;
}

static int is_string(const struct value *v, const char *text) {
    return v->kind == STRING && key_is(v, text);
}

/* An agent that names its kubetray version (0.2 and later): an older one is left to Python,
 * which asks it to restart into the kubetray installed now (exec_helper/agent_start.py). */
static int is_hello(const struct frame *f) {
    return is_string(&f->type, KT_TYPE_HELLO) && f->version.kind == INT &&
           f->version.i == KT_PROTOCOL_VERSION && f->kubetray.kind == STRING;
}

static size_t frame_size(const unsigned char *h) {
    return (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | (size_t)h[3];
}

/* stdout / stderr: a string, or null or absent for none (as the Python helper reads them). */
static int text(const struct value *v, const char **s, size_t *n) {
    if (v->kind == STRING) {
        *s = v->s;
        *n = v->n;
        return 1;
    }
    *s = "";
    *n = 0;
    return v->kind == NONE || v->kind == NUL;
}

int kt_parse_answer(const unsigned char *data, size_t len, struct kt_answer *out) {
    memset(out, 0, sizeof *out);
    if (len < 2 * KT_HEADER_SIZE) return 0;
    size_t first = frame_size(data);
    if (first > KT_MAX_FRAME || first > len - 2 * KT_HEADER_SIZE) return 0;
    const unsigned char *second = data + KT_HEADER_SIZE + first;
    size_t rest = len - 2 * KT_HEADER_SIZE - first;
    if (frame_size(second) != rest || rest > KT_MAX_FRAME) return 0;

    char *storage = malloc(len);
    if (!storage) return 0;
    struct frame hello, result;
    int ok = read_object(data + KT_HEADER_SIZE, first, storage, &hello) && is_hello(&hello) &&
             read_object(second + KT_HEADER_SIZE, rest, storage + first, &result) &&
             is_string(&result.type, KT_TYPE_RESULT) && result.answered.kind == TRUE &&
             result.exit.kind == INT && result.exit.i >= INT32_MIN && result.exit.i <= INT32_MAX &&
             text(&result.out, &out->out, &out->out_len) &&
             text(&result.err, &out->err, &out->err_len);
    if (!ok) {
        wipe(storage, len);
        free(storage);
        memset(out, 0, sizeof *out);
        return 0;
    }
    /* os._exit(code) in the Python helper: the status is the low 8 bits, two's complement. */
    out->exit_code = (int)((uint32_t)(int32_t)result.exit.i & 0xFFu);
    out->storage = storage;
    out->storage_len = len;
    return 1;
}

void kt_answer_free(struct kt_answer *answer) {
    if (answer->storage) {
        wipe(answer->storage, answer->storage_len);
        free(answer->storage);
    }
    memset(answer, 0, sizeof *answer);
}

/* ---- The socket ------------------------------------------------------------------------- */

static const char *nonempty(const char *value) { return value && *value ? value : NULL; }

/* The agent's socket by exec_helper.paths and transport_unix's rules, each check included;
 * 0 when there is none we may use. */
static int socket_path(char *out, size_t size) {
    struct stat st;
    const char *forwarded = nonempty(getenv(KT_FORWARD_ENV));
    if (forwarded) { /* ours, a socket, closed to others, in a directory nobody else can swap */
        if (lstat(forwarded, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid() ||
            (st.st_mode & 077))
            return 0;
        if ((size_t)snprintf(out, size, "%s", forwarded) >= size) return 0;
        char *slash = strrchr(out, '/');
        const char *parent = ".";
        if (slash && slash > out) {
            *slash = 0;
            parent = out;
        }
        int swappable = stat(parent, &st) != 0 || ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) ||
                        (st.st_uid != 0 && st.st_uid != getuid());
        if (slash) *slash = '/';
        return !swappable;
    }
    const char *dir = nonempty(getenv(KT_RUNTIME_ENV));
    int n;
    if (dir) {
        n = snprintf(out, size, "%s", dir);
    } else {
#ifdef __APPLE__
        const char *home = nonempty(getenv("HOME"));
        if (!home) return 0;
        n = snprintf(out, size, "%s/Library/Application Support/%s", home, KT_APP);
#else
        const char *xdg = nonempty(getenv("XDG_RUNTIME_DIR"));
        n = xdg ? snprintf(out, size, "%s/%s", xdg, KT_APP)
                : snprintf(out, size, "/tmp/%s-%lu", KT_APP, (unsigned long)getuid());
#endif
    }
    if (n < 0 || (size_t)n >= size) return 0;
    /* Private: a directory (not a symlink to one), ours, mode 700. */
    if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
        return 0;
    size_t used = (size_t)n;
    n = snprintf(out + used, size - used, "/%s", KT_SOCKET_NAME);
    return n > 0 && (size_t)n < size - used;
}

/* How long to wait for the whole answer: protocol.CACHED_TIMEOUT (an answer from memory takes
 * a millisecond), or $KUBETRAY_EXEC_TIMEOUT when that is shorter. A value that is not plainly a
 * positive number (strtod must read all of it): 0, no fast path, and Python reads it. */
static int read_timeout(double *out) {
    const char *value = getenv(KT_TIMEOUT_ENV);
    *out = KT_CACHED_TIMEOUT;
    if (!value || !*value) return 1;
    if (strpbrk(value, "xX_")) return 0; /* hex floats, digit groups: Python's business */
    char *end;
    errno = 0;
    double t = strtod(value, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (end == value || *end || errno == ERANGE || !isfinite(t) || t <= 0) return 0;
    if (t < *out) *out = t;
    return 1;
}

static int peer_is_us(int fd) {
#if defined(__linux__)
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred &&
           cred.uid == getuid();
#elif defined(__APPLE__)
    uid_t uid;
    gid_t gid;
    return getpeereid(fd, &uid, &gid) == 0 && uid == getuid();
#else
    (void)fd;
    return 0; /* no way to know who listens: never talk */
#endif
}

static int set_timeouts(int fd, double timeout) {
    struct timeval tv;
    tv.tv_sec = (time_t)timeout;
    tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1; /* 0 would mean "wait forever" */
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
           setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

/* Connected to the agent, checked to run as us, with timeouts set; -1 otherwise. */
static int open_socket(const char *path, double timeout) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof addr.sun_path) return -1;
    memcpy(addr.sun_path, path, n + 1);
    /* Non-blocking for connect() only: an agent whose queue is full (EAGAIN) gets Python,
     * which waits for it, rather than this program waiting here. */
#if defined(SOCK_CLOEXEC) && defined(SOCK_NONBLOCK)
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
#else
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
#endif
#ifdef SO_NOSIGPIPE
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) != 0) {
        close(fd);
        return -1;
    }
#endif
    if (connect(fd, (const struct sockaddr *)&addr, sizeof addr) != 0 || fcntl(fd, F_SETFL, 0) != 0 ||
        !peer_is_us(fd) || !set_timeouts(fd, timeout)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, KT_SEND_FLAGS);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n bytes, all by the deadline: each wait is for the time left (an agent that drips bytes
 * cannot hold kubectl longer than the whole timeout). */
static int recv_all(int fd, unsigned char *p, size_t n, double deadline) {
    while (n > 0) {
        double left = deadline - now();
        if (left <= 0) return 0;
        struct pollfd want = {fd, POLLIN, 0};
        int ready = poll(&want, 1, (int)(left * 1000) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return 0; /* timed out, or an error */
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0; /* closed, or an error */
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* Two frames (hello, result), together as kt_parse_answer reads them; NULL when the agent
 * says anything else. The first must be a hello: then a message or prompt frame (an agent
 * that did not follow the request) is refused without waiting for more. */
static unsigned char *read_reply(int fd, double timeout, size_t *len) {
    double deadline = now() + timeout;
    unsigned char *data = NULL;
    size_t used = 0;
    for (int i = 0; i < 2; i++) {
        unsigned char *grown = realloc(data, used + KT_HEADER_SIZE);
        if (!grown) goto fail;
        data = grown;
        if (!recv_all(fd, data + used, KT_HEADER_SIZE, deadline)) goto fail;
        size_t n = frame_size(data + used);
        if (n > KT_MAX_FRAME) goto fail;
        grown = realloc(data, used + KT_HEADER_SIZE + n);
        if (!grown) goto fail;
        data = grown;
        if (!recv_all(fd, data + used + KT_HEADER_SIZE, n, deadline)) goto fail;
        if (i == 0) {
            char *scratch = malloc(n + 1);
            struct frame hello;
            int ok = scratch && read_object(data + KT_HEADER_SIZE, n, scratch, &hello) &&
                     is_hello(&hello);
            free(scratch);
            if (!ok) goto fail;
        }
        used += KT_HEADER_SIZE + n;
    }
    *len = used;
    return data;
fail:
    if (data) wipe(data, used);
    free(data);
    return NULL;
}

/* ---- Printing, as exec_helper.__main__.print_answer does -------------------------------- */

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* Trailing newlines dropped, C0 controls, DEL and C1 controls as \xNN (errors.printable; the
 * agent has escaped everything else that is not printable), then one newline. */
static int write_stderr(const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char chunk[4096];
    size_t used = 0;
    int ok = 1;
    while (n > 0 && s[n - 1] == '\n') n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int control = c < 0x20 || c == 0x7F;
        /* The text is valid UTF-8: 0xC2 always starts U+0080..U+00BF. */
        if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] <= 0x9F) {
            c = (unsigned char)s[++i];
            control = 1;
        }
        if (sizeof chunk - used < 5) { /* room for an escape, and the final newline */
            ok = ok && write_all(2, chunk, used);
            used = 0;
        }
        if (control) {
            chunk[used++] = '\\';
            chunk[used++] = 'x';
            chunk[used++] = hex[c >> 4];
            chunk[used++] = hex[c & 0xF];
        } else {
            chunk[used++] = (char)c;
        }
    }
    chunk[used++] = '\n';
    return write_all(2, chunk, used) && ok;
}

static int print_answer(const struct kt_answer *a) {
    /* As in Python (which ignores SIGPIPE): a reader gone away is a failure, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    int ok = 1;
    if (a->out_len) ok = write_all(1, a->out, a->out_len);
    if (ok && a->err_len) ok = write_stderr(a->err, a->err_len);
    return ok ? a->exit_code : 1;
}

/* ---- The fast path ---------------------------------------------------------------------- */

/* Whether Python would read non-ASCII arguments as UTF-8, as this sends them: always on macOS;
 * elsewhere under a UTF-8 locale, or C / POSIX (Python's UTF-8 mode, PEP 540). */
static int utf8_arguments(void) {
#ifdef __APPLE__
    return 1;
#else
    const char *name = nonempty(getenv("LC_ALL"));
    if (!name) name = nonempty(getenv("LC_CTYPE"));
    if (!name) name = nonempty(getenv("LANG"));
    if (!name || strcmp(name, "C") == 0 || strcmp(name, "POSIX") == 0) return 1;
    return strcasestr(name, "utf-8") || strcasestr(name, "utf8");
#endif
}

/* What the Python helper answers without the agent (help, version, the kubelet's provider
 * mode), the kill switch, and non-ASCII arguments Python would decode otherwise. */
static int wanted(int argc, char **argv) {
    static const char *const help[] = {KT_HELP_ARGS};
    const char *fast = getenv(KT_FAST_ENV);
    if (argc < 1 || (fast && strcmp(fast, "0") == 0)) return 0;
    if (argc > 1 && strcmp(argv[1], KT_KUBELET_MODE) == 0) return 0;
    int ascii = 1;
    for (int i = 1; i < argc; i++) {
        if (in_list(help, argv[i], strlen(argv[i]))) return 0;
        for (const unsigned char *c = (const unsigned char *)argv[i]; *c && ascii; c++)
            ascii = *c < 0x80;
    }
    return ascii || utf8_arguments();
}

int kt_fast_path(int argc, char **argv) {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    double timeout;
    if (!wanted(argc, argv) || !read_timeout(&timeout) || !socket_path(path, sizeof path))
        return -1;
    struct buf request = {0};
    struct kt_answer answer = {0};
    unsigned char *reply = NULL;
    size_t reply_len = 0;
    int code = -1, fd = -1;
    if (build_request(&request, argc, argv) && (fd = open_socket(path, timeout)) >= 0 &&
        send_all(fd, request.data, request.len) &&
        (reply = read_reply(fd, timeout, &reply_len)) != NULL) {
        close(fd);
        fd = -1;
        if (kt_parse_answer(reply, reply_len, &answer)) code = print_answer(&answer);
    }
    if (fd >= 0) close(fd);
    kt_answer_free(&answer);
    if (reply) wipe(reply, reply_len);
    free(reply);
    if (request.data) wipe(request.data, request.len);
    free(request.data);
    return code;
}
