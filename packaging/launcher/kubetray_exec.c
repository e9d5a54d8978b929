/*
 * kubetray-exec as installed: a small launcher for the bundle's own Python.
 *
 * kubectl starts kubetray-exec on every command, so its start-up is the product's hot path.
 * PyInstaller's onedir bootloader on Linux re-executes itself once to set LD_LIBRARY_PATH and
 * then imports the standard library out of compressed archives (~4 ms more than `python -I -S`).
 * This launcher does what `python -I -S -c "from exec_helper.__main__ import run; run()"` does,
 * with the bundle's interpreter:
 *   - it finds its own directory (the real path, so /usr/bin/kubetray-exec -> /opt/... works),
 *   - loads the bundle's libpython by its full path (dlopen / LoadLibrary: no LD_LIBRARY_PATH,
 *     no restart, no rpath differences between Linux, macOS and Windows),
 *   - configures an isolated interpreter without `site` whose sys.path is only the helper's
 *     plain .pyc directory and the extension-module directory, and runs the helper.
 * Compiled at package time by packaging/build.py, with these macros:
 *   KT_PYLIB     the Python library's file name ("libpython3.11.so.1.0", "python311.dll")
 *   KT_INTERNAL  the bundle's library directory, relative to this program ("_internal")
 *   KT_DYNLOAD   extension modules, relative to KT_INTERNAL ("python3.11/lib-dynload", ".")
 *   KT_PRELOAD   (Linux) libpython's own libraries to load from the bundle first ("libz.so.1")
 * Only the Python C API's stable entry points since 3.8 (PyConfig) are used, resolved by name.
 *
 * On Linux and macOS, before any of that, fast_path.c asks the running agent for a credential
 * it holds in memory (no Python at all); only when it does not answer does Python start.
 * Windows always starts Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KT_PYLIB
#error "define KT_PYLIB"
#endif
#ifndef KT_INTERNAL
#define KT_INTERNAL "_internal"
#endif
#ifndef KT_DYNLOAD
#define KT_DYNLOAD "lib-dynload"
#endif
#ifndef KT_PRELOAD
#define KT_PRELOAD
#endif
#define KT_LIBDIR "kubetray-exec-lib"
#define KT_COMMAND L"import sys; sys.frozen = True\nfrom exec_helper.__main__ import run\nrun()\n"

#ifdef _WIN32
#include <windows.h>
typedef wchar_t kchar;
#define KT_(s) L##s
#define KT(s) KT_(s) /* expand the macro first, then widen */
#define KT_SEP "\\"
#define kt_len wcslen
#define kt_cpy wcscpy
#define kt_cat wcscat
#define KT_MAX 32768
#else
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif
#include "fast_path.h"
typedef char kchar;
#define KT(s) s
#define KT_SEP "/"
#define kt_len strlen
#define kt_cpy strcpy
#define kt_cat strcat
#define KT_MAX PATH_MAX
#endif

/* The Python functions this program calls, resolved from the bundle's library. */
static struct {
    void (*InitPythonConfig)(PyConfig *);
    PyStatus (*SetString)(PyConfig *, wchar_t **, const wchar_t *);
    PyStatus (*SetBytesString)(PyConfig *, wchar_t **, const char *);
    PyStatus (*SetBytesArgv)(PyConfig *, Py_ssize_t, char *const *);
    PyStatus (*SetArgv)(PyConfig *, Py_ssize_t, wchar_t *const *);
    PyStatus (*ListAppend)(PyWideStringList *, const wchar_t *);
    PyStatus (*InitializeFromConfig)(const PyConfig *);
    int (*StatusException)(PyStatus);
    void (*ExitStatusException)(PyStatus);
    int (*RunMain)(void);
    void (*ConfigClear)(PyConfig *);
    void (*RawFree)(void *);
} py;

static int fail(const char *what, const kchar *detail) {
#ifdef _WIN32
    fwprintf(stderr, L"kubetray-exec: %hs %ls\n", what, detail);
#else
    fprintf(stderr, "kubetray-exec: %s %s\n", what, detail);
#endif
    return 1;
}

/* This program's directory, links resolved; false if unknown. */
static int own_dir(kchar *out) {
#ifdef _WIN32
    DWORD n = GetModuleFileNameW(NULL, out, KT_MAX);
    if (n == 0 || n >= KT_MAX) return 0;
#elif defined(__APPLE__)
    char raw[PATH_MAX];
    uint32_t size = sizeof raw;
    if (_NSGetExecutablePath(raw, &size) != 0 || !realpath(raw, out)) return 0;
#else
    if (!realpath("/proc/self/exe", out)) return 0;
#endif
    kchar *slash = out + kt_len(out);
    while (slash > out && *slash != '/' && *slash != '\\') slash--;
    *slash = 0;
    return slash > out;
}

#ifdef KT_STATIC
/* Linked with the static libpython (as /usr/bin/python3 is on Debian): no library to load or
 * relocate at start-up; extension modules find the Py* symbols in this program. */
static int load(const kchar *path) {
    (void)path;
    py.InitPythonConfig = PyConfig_InitPythonConfig;
    py.SetString = PyConfig_SetString;
    py.SetBytesString = PyConfig_SetBytesString;
    py.SetBytesArgv = PyConfig_SetBytesArgv;
    py.SetArgv = PyConfig_SetArgv;
    py.ListAppend = PyWideStringList_Append;
    py.InitializeFromConfig = Py_InitializeFromConfig;
    py.StatusException = PyStatus_Exception;
    py.ExitStatusException = Py_ExitStatusException;
    py.RunMain = Py_RunMain;
    py.ConfigClear = PyConfig_Clear;
    py.RawFree = PyMem_RawFree;
    return 1;
}
#else
static int load(const kchar *path) {
#ifdef _WIN32
    HMODULE lib = LoadLibraryExW(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
#define SYM(name) GetProcAddress(lib, name)
#else
    /* RTLD_GLOBAL: extension modules find the Py* symbols in it. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
#define SYM(name) dlsym(lib, name)
#endif
    if (!lib) return 0;
    *(void **)&py.InitPythonConfig = (void *)SYM("PyConfig_InitPythonConfig");
    *(void **)&py.SetString = (void *)SYM("PyConfig_SetString");
    *(void **)&py.SetBytesString = (void *)SYM("PyConfig_SetBytesString");
    *(void **)&py.SetBytesArgv = (void *)SYM("PyConfig_SetBytesArgv");
    *(void **)&py.SetArgv = (void *)SYM("PyConfig_SetArgv");
    *(void **)&py.ListAppend = (void *)SYM("PyWideStringList_Append");
    *(void **)&py.InitializeFromConfig = (void *)SYM("Py_InitializeFromConfig");
    *(void **)&py.StatusException = (void *)SYM("PyStatus_Exception");
    *(void **)&py.ExitStatusException = (void *)SYM("Py_ExitStatusException");
    *(void **)&py.RunMain = (void *)SYM("Py_RunMain");
    *(void **)&py.ConfigClear = (void *)SYM("PyConfig_Clear");
    *(void **)&py.RawFree = (void *)SYM("PyMem_RawFree");
    void **all = (void **)&py;
    for (size_t i = 0; i < sizeof py / sizeof(void *); i++)
        if (!all[i]) return 0;
    return 1;
}
#endif

/* A path under the bundle, as the wide string PyConfig wants. */
static PyStatus set_path(PyConfig *config, wchar_t **field, const kchar *path) {
#ifdef _WIN32
    return py.SetString(config, field, path);
#else
    return py.SetBytesString(config, field, path);
#endif
}

static PyStatus append_path(PyConfig *config, const kchar *path) {
#ifdef _WIN32
    return py.ListAppend(&config->module_search_paths, path);
#else
    wchar_t *wide = NULL;
    PyStatus status = py.SetBytesString(config, &wide, path);
    if (py.StatusException(status)) return status;
    status = py.ListAppend(&config->module_search_paths, wide);
    py.RawFree(wide);
    return status;
#endif
}

#define CHECK(expr)                                                                         \
    do {                                                                                    \
        status = (expr);                                                                    \
        if (py.StatusException(status)) goto failed;                                        \
    } while (0)

#ifdef _WIN32
int wmain(int argc, wchar_t **argv) {
#else
int main(int argc, char **argv) {
#endif
    static kchar dir[KT_MAX], internal[KT_MAX], exe[KT_MAX], path[KT_MAX];
#ifndef _WIN32
    /* Most kubectl commands need only a credential the agent holds: no Python for those. */
    int answered = kt_fast_path(argc, argv);
    if (answered >= 0) return answered;
#endif
    if (!own_dir(dir)) return fail("cannot find its own directory", KT(""));
    if (kt_len(dir) + 200 >= KT_MAX) return fail("install path too long:", dir);
    kt_cpy(internal, dir);
    kt_cat(internal, KT(KT_SEP KT_INTERNAL));
#if !defined(_WIN32) && !defined(KT_STATIC)
    /* A library already loaded is not searched for again: libpython uses the bundle's copy. */
    static const char *preload[] = {KT_PRELOAD NULL};
    for (const char **name = preload; *name; name++) {
        kt_cpy(path, internal);
        kt_cat(path, KT_SEP);
        kt_cat(path, *name);
        dlopen(path, RTLD_NOW | RTLD_GLOBAL); /* if it fails, the system's copy may do */
    }
#endif
    kt_cpy(path, internal);
    kt_cat(path, KT(KT_SEP KT_PYLIB));
    if (!load(path)) return fail("cannot load the bundled Python library", path);

    PyStatus status;
    PyConfig config;
    py.InitPythonConfig(&config);
    /* python -I -S: no PYTHON* variables, no user site, no current directory, no site. */
    config.isolated = 1;
    config.use_environment = 0;
    config.user_site_directory = 0;
    config.safe_path = 1;
    config.site_import = 0;
    config.parse_argv = 0; /* our arguments are the helper's, not the interpreter's */
    config.write_bytecode = 0;
    config.pathconfig_warnings = 0;
    config.use_frozen_modules = 1;
    kt_cpy(exe, dir);
    kt_cat(exe, KT(KT_SEP));
#ifdef _WIN32
    kt_cat(exe, L"kubetray-exec.exe");
    CHECK(py.SetArgv(&config, argc, argv));
#else
    kt_cat(exe, "kubetray-exec");
    CHECK(py.SetBytesArgv(&config, argc, argv));
#endif
    /* sys.executable is this program: the helper finds `kubetray` beside it. */
    CHECK(set_path(&config, &config.executable, exe));
    CHECK(set_path(&config, &config.home, internal));
    CHECK(set_path(&config, &config.prefix, internal));
    CHECK(set_path(&config, &config.exec_prefix, internal));
    CHECK(set_path(&config, &config.base_prefix, internal));
    CHECK(set_path(&config, &config.base_exec_prefix, internal));
    config.module_search_paths_set = 1;
    kt_cpy(path, internal);
    kt_cat(path, KT(KT_SEP KT_LIBDIR));
    CHECK(append_path(&config, path));
    kt_cpy(path, internal);
    kt_cat(path, KT(KT_SEP KT_DYNLOAD));
    CHECK(append_path(&config, path));
    CHECK(py.SetString(&config, &config.run_command, KT_COMMAND));
    CHECK(py.InitializeFromConfig(&config));
    py.ConfigClear(&config);
    return py.RunMain();

failed:
    py.ConfigClear(&config);
    py.ExitStatusException(status); /* prints the reason, exits non-zero */
    return 1;
}
