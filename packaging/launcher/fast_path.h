/*
 * The launcher's fast path (Linux, macOS): ask the running agent for a credential it can
 * answer at once from memory, before any Python starts. See fast_path.c.
 */
#ifndef KT_FAST_PATH_H
#define KT_FAST_PATH_H

#include <stddef.h>

/* The agent's answer, as kt_parse_answer read it: valid UTF-8 that may hold NUL bytes (JSON's
 * \u0000), so out and err come with their lengths. They point into storage. */
struct kt_answer {
    int exit_code; /* the agent's exit, as the Python helper's os._exit() would pass it on */
    const char *out;
    size_t out_len;
    const char *err;
    size_t err_len;
    char *storage; /* owns the decoded strings; kt_answer_free wipes and frees it */
    size_t storage_len;
};

/* Try the fast path. Returns -1 when the agent did not answer (nothing was written: start
 * Python), else the exit code after writing the answer to stdout and stderr. */
int kt_fast_path(int argc, char **argv);

/* Read the agent's reply: exactly two frames, hello then a result with "answered": true.
 * Returns 1 and fills out (free it with kt_answer_free), or 0 for anything else. */
int kt_parse_answer(const unsigned char *data, size_t len, struct kt_answer *out);

void kt_answer_free(struct kt_answer *answer);

#endif
