#define _GNU_SOURCE
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t ignore_once = PTHREAD_ONCE_INIT;

// A child that dies before reading all its input must not take the server with it: a write
// to its pipe is EPIPE, not SIGPIPE (a server ignores SIGPIPE anyway; NIO's sockets do).
static void ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

static int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// Waits for the child; one that closed its stdout but goes on past the deadline is killed.
static child_outcome reap(pid_t pid, child_outcome outcome, int64_t deadline, int *detail) {
    int status = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, outcome == CHILD_EXITED ? WNOHANG : 0);
        if (done == pid) break;
        if (done < 0 && errno != EINTR) return CHILD_SPAWN_FAILED;
        if (done == 0) {
            if (now_ms() >= deadline) {
                kill(pid, SIGKILL);
                outcome = CHILD_TIMED_OUT;
            } else {
                struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
                nanosleep(&pause, NULL);
            }
        }
    }
    if (outcome != CHILD_EXITED) return outcome;
    if (WIFEXITED(status)) {
        *detail = WEXITSTATUS(status);
        return CHILD_EXITED;
    }
    // SIGXCPU (soft limit) or SIGKILL (hard): over the CPU budget.
    *detail = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
    return CHILD_SIGNALLED;
}

child_outcome lender_child_run(
    const char *path, char *const argv[], const unsigned char *input, size_t input_length, int cpu_seconds,
    int timeout_ms, size_t max_output, unsigned char **output, size_t *output_length, int *detail) {
    pthread_once(&ignore_once, ignore_sigpipe);
    *output = NULL;
    *output_length = 0;
    *detail = 0;

    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return CHILD_SPAWN_FAILED;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return CHILD_SPAWN_FAILED;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    // Nothing of the server's but the three: no socket, no database connection, no key file.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // The child starts with default signal handling whatever the server set.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    // No environment: the server's holds its database's URL and its key file's path.
    char *empty[] = {NULL};
    int spawned = posix_spawn(&pid, path, &actions, &attributes, argv, empty);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(in[0]);
    close(out[1]);
    if (spawned != 0) {
        close(in[1]);
        close(out[0]);
        *detail = spawned;
        return CHILD_SPAWN_FAILED;
    }
    // The budget is the parent's to set: the child's own code is what it bounds. The child
    // cannot have spent much before this lands (it is still starting).
    struct rlimit cpu = {.rlim_cur = (rlim_t)cpu_seconds, .rlim_max = (rlim_t)cpu_seconds + 1};
    prlimit(pid, RLIMIT_CPU, &cpu, NULL);
    // SIGXCPU dumps core by default: a hostile image must not leave a server-sized core.
    struct rlimit no_core = {.rlim_cur = 0, .rlim_max = 0};
    prlimit(pid, RLIMIT_CORE, &no_core, NULL);
    // Address space: the largest decode (160 MB of pixels) several times over, and the
    // runtime's reservations; past it an allocation fails and the child exits.
    struct rlimit memory = {.rlim_cur = (rlim_t)4 << 30, .rlim_max = (rlim_t)4 << 30};
    prlimit(pid, RLIMIT_AS, &memory, NULL);

    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    int64_t deadline = now_ms() + timeout_ms;
    size_t written = 0, capacity = 0;
    unsigned char *buffer = NULL;
    int writing = 1;
    if (input_length == 0) {
        close(in[1]);
        writing = 0;
    }
    child_outcome outcome = CHILD_EXITED;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            outcome = CHILD_TIMED_OUT;
            break;
        }
        struct pollfd fds[2] = {{.fd = out[0], .events = POLLIN}, {.fd = writing ? in[1] : -1, .events = POLLOUT}};
        int ready = poll(fds, 2, (int)(left > 1000 ? 1000 : left));
        if (ready < 0) {
            if (errno == EINTR) continue;
            outcome = CHILD_TIMED_OUT;
            break;
        }
        if (writing && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = write(in[1], input + written, input_length - written);
            if (n > 0) written += (size_t)n;
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input_length) {
                close(in[1]);
                writing = 0;
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (capacity - *output_length < 65536) {
                size_t grown = capacity ? capacity * 2 : 1 << 20;
                if (grown > max_output + 65536) grown = max_output + 65536;
                unsigned char *larger = realloc(buffer, grown);
                if (!larger) {
                    outcome = CHILD_TOO_MUCH_OUTPUT;
                    break;
                }
                buffer = larger;
                capacity = grown;
            }
            ssize_t n = read(out[0], buffer + *output_length, capacity - *output_length);
            if (n == 0) break;  // the child closed its stdout: it is done
            if (n > 0) {
                *output_length += (size_t)n;
                if (*output_length > max_output) {
                    outcome = CHILD_TOO_MUCH_OUTPUT;
                    break;
                }
            } else if (errno != EAGAIN && errno != EINTR) {
                break;
            }
        }
    }
    if (writing) close(in[1]);
    close(out[0]);
    if (outcome != CHILD_EXITED) kill(pid, SIGKILL);
    outcome = reap(pid, outcome, deadline, detail);
    if (outcome != CHILD_EXITED) {
        free(buffer);
        *output_length = 0;
        return outcome;
    }
    *output = buffer;
    return outcome;
}
