/* fuzz.h - what every fuzz target (tests/fuzz/fuzz_<reader>.c) shares.
 *
 * A target defines LLVMFuzzerTestOneInput(data, size) and feeds the bytes
 * to one reader.  It is built twice over (tests/fuzz/CMakeLists.txt): with
 * libFuzzer when HS_FUZZ=ON (clang), and always as a corpus replayer
 * (replay.c's main() feeds it every file of its corpus folder), so the
 * plain and sanitized ctest builds replay the seeds and the kept crashing
 * inputs on every run.
 *
 * The readers take paths: hs_fuzz_file() writes the input to a file in a
 * private temporary folder; hs_fuzz_dir() splits it into several files.
 * hs_fuzz_check() asserts what every reader promises whatever the bytes:
 * success, or an error code with one non-empty line of message. */
#ifndef HS_FUZZ_H
#define HS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as the file NAME (a plain base name) in the target's
 * temporary folder; returns its path (valid until the next call). */
const char *hs_fuzz_file(const uint8_t *data, size_t size, const char *name);

/* Splits the input at lines "//// NAME" (NAME a base name of [A-Za-z0-9._-])
 * into files of a freshly emptied folder, whose path it returns; bytes
 * before the first such line go to DEFAULT_NAME (NULL: dropped). */
const char *hs_fuzz_dir(const uint8_t *data, size_t size, const char *default_name);

/* Aborts (a crash the fuzzer reports) unless rc is 0, or rc is a negative
 * HS_E* code and err holds one line: non-empty, no control characters. */
void hs_fuzz_check(int rc, const hs_err *err);

#endif
