/*
 * fuzz_common.h - what the fuzz targets of tests/fuzz/ share (docs/fuzzing.md).
 *
 * Every target defines LLVMFuzzerTestOneInput. It is built twice: with clang and libFuzzer
 * (tests/fuzz/CMakeLists.txt, `./run.sh fuzz`), and with the normal compiler against
 * replay_main.c, which feeds it the committed corpus in the test suite.
 */
#ifndef SELECTIVBENCH_FUZZ_COMMON_H
#define SELECTIVBENCH_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The entry point libFuzzer and replay_main.c call with one input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes data to a file of this process under /tmp (the tag names the target) and puts its
 * path in path[size]. The same path every call, so one input never leaves files behind for
 * the next: fuzz_temp_remove removes it with its SQLite companions (-wal, -shm, -journal)
 * and the ".tmp" a writer leaves. Returns 0 on success, -1 when the file cannot be written
 * (the target then skips the input). */
int fuzz_temp_write(const char *tag, const uint8_t *data, size_t size, char *path, size_t cap);

/* The path fuzz_temp_write uses for tag and suffix, without writing anything. */
void fuzz_temp_path(const char *tag, const char *suffix, char *path, size_t cap);

/* Removes path and its companions; missing files are fine. */
void fuzz_temp_remove(const char *path);

/* Removes a per-process folder of fuzz_temp_path: its database db (with its companions),
 * the run locks in dir/locks/ and the folders themselves. */
void fuzz_temp_dir_remove(const char *dir, const char *db);

/* A copy of data with a terminating NUL (inputs are not strings); free() it. NULL when out
 * of memory. */
char *fuzz_text(const uint8_t *data, size_t size);

/* Stops the process with a message on stderr when an invariant a target checks is false:
 * libFuzzer records the input as a crash, the replay test fails. */
void fuzz_check(int ok, const char *what);

#endif
