// unix-echo: the floor under the broker's hot path, measured in the same run as the broker (tools/bench broker).
// A server that answers each NUL-terminated message on a Unix stream socket with a fixed-size NUL-terminated
// reply (varlink's framing, no JSON, no work), and clients that time it.
//
//   unix-echo serve SOCKET REPLY_BYTES           listens (thread per connection); runs until killed
//   unix-echo rtt SOCKET N REQUEST_BYTES          one connection, N round trips: "echo-rtt p50 X p99 Y" (µs)
//   unix-echo load SOCKET SECONDS START_MS REQUEST_BYTES
//                                                 one connection, round trips from START_MS (ms since the epoch)
//                                                 for SECONDS: "calls N"
//
// Exit status: 0; 1 on a socket error (stderr names it); 2 on a usage error.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static size_t reply_bytes;

static void fail(const char *what) {
    fprintf(stderr, "unix-echo: %s: %s\n", what, strerror(errno));
    exit(1);
}

static struct sockaddr_un address(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        fprintf(stderr, "unix-echo: socket path too long: %s\n", path);
        exit(2);
    }
    strcpy(a.sun_path, path);
    return a;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int write_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

// Reads until a NUL ends a message; bytes after it stay in `buffer` for the next call (`*held`).
static int read_message(int fd, char *buffer, size_t size, size_t *held) {
    for (;;) {
        char *end = memchr(buffer, 0, *held);
        if (end) {
            size_t used = (size_t)(end - buffer) + 1;
            memmove(buffer, buffer + used, *held - used);
            *held -= used;
            return 0;
        }
        if (*held == size) *held = 0;  // an overlong message: its bytes are dropped, not kept
        ssize_t n = read(fd, buffer + *held, size - *held);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        *held += (size_t)n;
    }
}

static void *serve_connection(void *argument) {
    int fd = (int)(intptr_t)argument;
    char *reply = malloc(reply_bytes + 1);
    memset(reply, 'x', reply_bytes);
    reply[reply_bytes] = 0;
    char buffer[65536];
    size_t held = 0;
    while (read_message(fd, buffer, sizeof buffer, &held) == 0) {
        if (write_all(fd, reply, reply_bytes + 1) != 0) break;
    }
    free(reply);
    close(fd);
    return NULL;
}

static _Noreturn void serve(const char *path, size_t bytes) {
    reply_bytes = bytes;
    struct sockaddr_un a = address(path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) fail("socket");
    unlink(path);
    if (bind(listener, (struct sockaddr *)&a, sizeof a) != 0) fail(path);
    if (listen(listener, 64) != 0) fail("listen");
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            fail("accept");
        }
        pthread_t thread;
        if (pthread_create(&thread, NULL, serve_connection, (void *)(intptr_t)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(thread);
    }
}

static int connect_to(const char *path) {
    struct sockaddr_un a = address(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fail(path);
    return fd;
}

static char *request(size_t bytes) {
    char *message = malloc(bytes + 1);
    memset(message, 'r', bytes);
    message[bytes] = 0;
    return message;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int rtt(const char *path, long count, size_t bytes) {
    int fd = connect_to(path);
    char *message = request(bytes);
    char buffer[65536];
    size_t held = 0;
    double *samples = malloc(sizeof(double) * (size_t)count);
    for (long i = -100; i < count; i++) {  // 100 warm-up round trips first
        double start = now_us();
        if (write_all(fd, message, bytes + 1) != 0 || read_message(fd, buffer, sizeof buffer, &held) != 0) {
            fail("round trip");
        }
        if (i >= 0) samples[i] = now_us() - start;
    }
    qsort(samples, (size_t)count, sizeof(double), compare);
    printf("echo-rtt p50 %.1f p99 %.1f\n", samples[count / 2], samples[(long)(count * 0.99)]);
    return 0;
}

static int load(const char *path, double seconds, long long start_ms, size_t bytes) {
    int fd = connect_to(path);
    char *message = request(bytes);
    char buffer[65536];
    size_t held = 0;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    long long now_ms = wall.tv_sec * 1000LL + wall.tv_nsec / 1000000;
    if (start_ms > now_ms) usleep((useconds_t)((start_ms - now_ms) * 1000));
    double end = now_us() + seconds * 1e6;
    long calls = 0;
    while (now_us() < end) {
        if (write_all(fd, message, bytes + 1) != 0 || read_message(fd, buffer, sizeof buffer, &held) != 0) {
            fail("round trip");
        }
        calls++;
    }
    printf("calls %ld\n", calls);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "serve") == 0) serve(argv[2], (size_t)atol(argv[3]));
    if (argc == 5 && strcmp(argv[1], "rtt") == 0) return rtt(argv[2], atol(argv[3]), (size_t)atol(argv[4]));
    if (argc == 6 && strcmp(argv[1], "load") == 0) {
        return load(argv[2], atof(argv[3]), atoll(argv[4]), (size_t)atol(argv[5]));
    }
    fprintf(stderr,
            "usage: unix-echo serve SOCKET REPLY_BYTES | rtt SOCKET N REQUEST_BYTES | "
            "load SOCKET SECONDS START_MS REQUEST_BYTES\n");
    return 2;
}
