#ifndef LENDER_CHILD_H
#define LENDER_CHILD_H

#include <stddef.h>

/// How a child ran: `exited` with `status`, or killed at its deadline, over its CPU budget, or
/// for writing more than it may.
typedef enum {
    CHILD_EXITED = 0,
    CHILD_TIMED_OUT = 1,
    CHILD_SIGNALLED = 2,
    CHILD_TOO_MUCH_OUTPUT = 3,
    CHILD_SPAWN_FAILED = 4,
} child_outcome;

/// Runs `path` with `argv` (NULL-terminated), its stdin the `input` bytes and its stderr
/// /dev/null, with no environment and no other descriptor, under a CPU-time limit of
/// `cpu_seconds` (RLIMIT_CPU, set on the child by its parent; no core dumps; 4 GiB of address
/// space) and a wall-clock deadline of `timeout_ms`, past which it is killed (SIGKILL).
/// Its stdout, up to `max_output` bytes, is returned in `*output` (free with `free`). Blocks
/// the calling thread: call it from a thread pool. `*detail` is the exit status or signal.
child_outcome lender_child_run(
    const char *path, char *const argv[], const unsigned char *input, size_t input_length, int cpu_seconds,
    int timeout_ms, size_t max_output, unsigned char **output, size_t *output_length, int *detail);

#endif
