/*
 * libFuzzer target for kt_parse_answer, the only code that reads bytes the agent chose:
 *   make fuzz            (FUZZ_SECONDS=60; tests/launcher.py builds it with clang)
 * ASan and UBSan catch what the parser must never do; the checks below are what the printing
 * side relies on when the parser says yes.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fast_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct kt_answer answer;
    if (!kt_parse_answer(data, size, &answer)) {
        /* Nothing is kept from a refused answer. */
        if (answer.storage || answer.out || answer.err) abort();
        return 0;
    }
    if (answer.exit_code < 0 || answer.exit_code > 255) abort();
    if (answer.out_len > size || answer.err_len > size) abort();
    /* Every byte handed to the printer is inside what was allocated (ASan checks the reads). */
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < answer.out_len; i++) sum ^= (unsigned char)answer.out[i];
    for (size_t i = 0; i < answer.err_len; i++) sum ^= (unsigned char)answer.err[i];
    (void)sum;
    kt_answer_free(&answer);
    return 0;
}
