/*
 * varlink-call: the smallest varlink client, for the Flatpak tests (Tests/Flatpak/README.md).
 *
 *   varlink-call [--handoff | --wait-stdin | --repeat N] SOCKET_PATH [JSON_CALL...]
 *
 * Connects to the Unix socket SOCKET_PATH and sends each JSON_CALL as one NUL-terminated message, then
 * prints each reply (its bytes, then '\n') to stdout. A reply with "continues": true is followed by more
 * (all printed); a call with "oneway": true gets none. Exit 0 when every reply was read, 1 on a socket
 * error (stderr names the socket and the error), 2 on a usage error.
 *
 * --wait-stdin: after connecting, print "connected" and read one line from stdin before sending, so a
 *   test can act while the connection is open and no call was made.
 * --handoff: connect, then fork; the process that connected exits at once (status 0) and its child sends
 *   the calls on the inherited socket. The child takes a pidfd of the parent before the parent may exit,
 *   waits until that pidfd says the parent is gone, prints "handed-off", reads one line from stdin, then
 *   sends. This is the peer whose SO_PEERCRED pid (and SO_PEERPIDFD) is dead while the connection lives.
 *
 * --repeat N: connect, make the calls and close, N times; print no replies but one line
 *   "repeat N p50_us P p90_us Q" (each from before connect() to the last reply read): the cost of a new
 *   connection to its first replies, which is what the server's identification of a caller adds to (the
 *   benchmark of issue 35, tools/bench-flatpak). A reply that is an error ends it with status 1.
 *
 * Built static (gcc -static -O2 varlink-call.c) so it runs inside a sandbox whose runtime has no libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* x86_64; Debian 12's headers have it, older ones may not */
#endif

static const char *socket_path;

static void usage(void) {
    fputs("usage: varlink-call [--handoff | --wait-stdin | --repeat N] SOCKET_PATH [JSON_CALL...]\n", stderr);
    exit(2);
}

static void socket_failure(const char *what, int error) {
    fprintf(stderr, "varlink-call: %s: %s: %s\n", socket_path, what, error ? strerror(error) : "connection closed by the peer");
    exit(1);
}

/* Skips one JSON value starting at *p (a string, a literal or number, or a nested object/array).
 * Enough to walk a message's top-level keys; the server, not this client, validates JSON. */
static const char *skip_string(const char *p) {
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : p;
}

static const char *skip_value(const char *p) {
    if (*p == '"') return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') { p = skip_string(p); continue; }
            if (*p == '{' || *p == '[') depth++;
            else if (*p == '}' || *p == ']') { if (--depth == 0) return p + 1; }
            p++;
        }
        return p;
    }
    while (*p && *p != ',' && *p != '}' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
    return p;
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Whether the top-level object `message` has `"key": true` (not a key of a nested object, nor text in a
 * string, which a substring search would take for it). */
static int top_level_true(const char *message, const char *key) {
    const char *p = skip_space(message);
    if (*p != '{') return 0;
    p = skip_space(p + 1);
    size_t key_length = strlen(key);
    while (*p == '"') {
        const char *name = p + 1, *end = skip_string(p);
        int matches = (size_t)(end - 1 - name) == key_length && strncmp(name, key, key_length) == 0;
        p = skip_space(end);
        if (*p != ':') return 0;
        p = skip_space(p + 1);
        if (matches && strncmp(p, "true", 4) == 0) return 1;
        p = skip_space(skip_value(p));
        if (*p != ',') return 0;
        p = skip_space(p + 1);
    }
    return 0;
}

static char *read_reply(int fd);

static void send_all(int fd, const char *bytes, size_t length) {
    while (length > 0) {
        ssize_t n = send(fd, bytes, length, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            /* A server that refuses a connection (too many) answers it unasked and closes it: a call sent
             * after the close fails, and the refusal is what the peer said. Print it if it came. */
            int error = errno;
            if (error == EPIPE || error == ECONNRESET) {
                char *refusal = read_reply(fd);
                printf("%s\n", refusal);
                fflush(stdout);
                exit(0);
            }
            socket_failure("send", error);
        }
        bytes += n;
        length -= (size_t)n;
    }
}

/* Bytes received and not yet printed: a read may hold the end of one reply and the start of the next. */
static char *buffer;
static size_t buffered, capacity;

/* Reads one NUL-terminated reply into a new string (the caller frees it). */
static char *read_reply(int fd) {
    for (;;) {
        char *nul = memchr(buffer, '\0', buffered);
        if (nul) {
            size_t length = (size_t)(nul - buffer);
            char *reply = malloc(length + 1);
            if (!reply) { perror("varlink-call: malloc"); exit(1); }
            memcpy(reply, buffer, length + 1);
            memmove(buffer, nul + 1, buffered - length - 1);
            buffered -= length + 1;
            return reply;
        }
        if (capacity - buffered < 4096) {
            capacity = capacity ? capacity * 2 : 65536;
            buffer = realloc(buffer, capacity);
            if (!buffer) { perror("varlink-call: realloc"); exit(1); }
        }
        ssize_t n = recv(fd, buffer + buffered, capacity - buffered, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) socket_failure("recv", errno);
        if (n == 0) socket_failure("recv", 0);
        buffered += (size_t)n;
    }
}

static void read_line_from_stdin(void) {
    int c;
    while ((c = getchar()) != EOF && c != '\n') {}
}

static int call_all(int fd, char **calls, int count) {
    for (int i = 0; i < count; i++) {
        send_all(fd, calls[i], strlen(calls[i]) + 1); /* the message and its NUL */
        if (top_level_true(calls[i], "oneway")) continue;
        for (;;) {
            char *reply = read_reply(fd);
            int more = top_level_true(reply, "continues");
            printf("%s\n", reply);
            fflush(stdout);
            free(reply);
            if (!more) break;
        }
    }
    return 0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* --repeat: N connections, each making the calls (replies read, not printed), timed one by one. */
static int repeat_calls(const struct sockaddr_un *address, int times, char **calls, int count) {
    double *took = calloc((size_t)times, sizeof *took);
    if (!took) return 1;
    for (int n = 0; n < times; n++) {
        double start = now_us();
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) socket_failure("socket", errno);
        if (connect(fd, (const struct sockaddr *)address, sizeof *address) < 0) socket_failure("connect", errno);
        for (int i = 0; i < count; i++) {
            send_all(fd, calls[i], strlen(calls[i]) + 1);
            char *reply = read_reply(fd);
            if (strstr(reply, "\"error\"")) {
                fprintf(stderr, "varlink-call: %s: an error reply: %s\n", socket_path, reply);
                return 1;
            }
            free(reply);
        }
        took[n] = now_us() - start;
        close(fd);
    }
    qsort(took, (size_t)times, sizeof *took, compare_doubles);
    printf("repeat %d p50_us %.1f p90_us %.1f\n", times, took[times / 2], took[times * 9 / 10]);
    return 0;
}

int main(int argc, char **argv) {
    int handoff = 0, wait_stdin = 0, repeat = 0, i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--handoff") == 0) handoff = 1;
        else if (strcmp(argv[i], "--wait-stdin") == 0) wait_stdin = 1;
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--") == 0) { i++; break; }
        else usage();
    }
    if (i >= argc || handoff + wait_stdin + (repeat > 0) > 1) usage();
    socket_path = argv[i++];

    struct sockaddr_un address = { .sun_family = AF_UNIX };
    if (strlen(socket_path) >= sizeof address.sun_path) {
        fprintf(stderr, "varlink-call: %s: the path is too long for a Unix socket\n", socket_path);
        return 2;
    }
    strcpy(address.sun_path, socket_path);
    if (repeat) return repeat_calls(&address, repeat, argv + i, argc - i);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) socket_failure("socket", errno);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) socket_failure("connect", errno);

    if (wait_stdin) {
        puts("connected");
        fflush(stdout);
        read_line_from_stdin();
    }

    if (handoff) {
        /* The pipe makes the parent wait until the child holds its pidfd: taken after the parent's exit,
         * pidfd_open would fail (or, the pid reused, name another process). */
        int ready[2];
        if (pipe(ready) < 0) { perror("varlink-call: pipe"); return 1; }
        pid_t parent = getpid();
        fflush(stdout);
        pid_t child = fork();
        if (child < 0) { perror("varlink-call: fork"); return 1; }
        if (child > 0) {
            char byte;
            close(ready[1]);
            while (read(ready[0], &byte, 1) < 0 && errno == EINTR) {}
            _exit(0);
        }
        close(ready[0]);
        int pidfd = (int)syscall(SYS_pidfd_open, parent, 0);
        if (pidfd < 0) { perror("varlink-call: pidfd_open"); return 1; }
        close(ready[1]); /* the parent reads EOF and exits */
        struct pollfd gone = { .fd = pidfd, .events = POLLIN };
        while (poll(&gone, 1, -1) < 0 && errno == EINTR) {}
        close(pidfd);
        puts("handed-off");
        fflush(stdout);
        read_line_from_stdin();
    }

    return call_all(fd, argv + i, argc - i);
}
