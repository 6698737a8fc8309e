/*
 * pam_sharedmode: a worker signs in at the login screen through deviced, and the shift's login session
 * is recorded there. See include/pam_sharedmode.h for the helper's line protocol.
 *
 * Arguments (all optional): socket=PATH (deviced's socket), helper=PATH (absolute), flow=password|
 * nativeAuth|deviceCode, app=ID, timeout=SECONDS (the cap on one call, default 900), debug.
 *
 * What it asks of its host: no threads (nothing here starts one), one child per call reaped by its pid
 * (SIGCHLD is set to the default while the child runs, as pam_unix does for its helper), every wait
 * bounded by poll and the call's cap, writes with MSG_NOSIGNAL, the user's answers wiped once sent.
 */
#define _GNU_SOURCE
#include "pam_sharedmode.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <security/pam_modutil.h>

/* The name of the data pam_sm_authenticate leaves for the session phase. */
#define SIGNIN_DATA "pam_sharedmode_signin"
/* How long a helper that sent its result has to exit before it is killed (milliseconds). */
#define EXIT_GRACE_MS 5000
#define MAX_ARGS 32
/* The PAM entry points are all the module exports (it is built with -fvisibility=hidden). */
#define EXPORTED __attribute__((visibility("default")))

struct options {
    const char *socket;
    const char *helper;
    const char *flow;
    const char *app;
    int timeout;
    int debug;
};

/* What the helper reported besides its result. */
struct report {
    char *user;
    char *worker;
    char *correlation;
};

/* Left by a successful authentication for open_session and close_session. */
struct signin {
    char *worker;
    char *correlation;
    char *session_id;
};

struct helper {
    pid_t pid;
    int fd;
    struct timespec deadline;
    size_t used;
    char buffer[PAM_SHAREDMODE_MAX_LINE];
};

static void wipe(void *memory, size_t length) {
    if (memory != NULL) explicit_bzero(memory, length);
}

static void free_text(char **text) {
    if (*text != NULL) {
        wipe(*text, strlen(*text));
        free(*text);
        *text = NULL;
    }
}

static void free_report(struct report *report) {
    free_text(&report->user);
    free_text(&report->worker);
    free_text(&report->correlation);
}

static void free_signin(pam_handle_t *pamh, void *data, int status) {
    (void)pamh;
    (void)status;
    struct signin *signin = data;
    if (signin == NULL) return;
    free_text(&signin->worker);
    free_text(&signin->correlation);
    free_text(&signin->session_id);
    free(signin);
}

static int parse_options(pam_handle_t *pamh, int argc, const char **argv, struct options *options) {
    memset(options, 0, sizeof(*options));
    options->helper = PAM_SHAREDMODE_DEFAULT_HELPER;
    options->timeout = PAM_SHAREDMODE_DEFAULT_TIMEOUT;
    for (int index = 0; index < argc; index++) {
        const char *argument = argv[index];
        if (strncmp(argument, "socket=", 7) == 0 && argument[7] == '/') {
            options->socket = argument + 7;
        } else if (strncmp(argument, "helper=", 7) == 0 && argument[7] == '/') {
            options->helper = argument + 7;
        } else if (strcmp(argument, "flow=password") == 0 || strcmp(argument, "flow=nativeAuth") == 0
                   || strcmp(argument, "flow=deviceCode") == 0) {
            options->flow = argument + 5;
        } else if (strncmp(argument, "app=", 4) == 0 && argument[4] != '\0') {
            options->app = argument + 4;
        } else if (strncmp(argument, "timeout=", 8) == 0) {
            char *end = NULL;
            errno = 0;
            long seconds = strtol(argument + 8, &end, 10);
            if (errno != 0 || end == argument + 8 || *end != '\0' || seconds < 1 || seconds > 86400) {
                pam_syslog(pamh, LOG_ERR, "bad argument %s: timeout= takes whole seconds from 1 to 86400", argument);
                return PAM_SERVICE_ERR;
            }
            options->timeout = (int)seconds;
        } else if (strcmp(argument, "debug") == 0) {
            options->debug = 1;
        } else {
            pam_syslog(pamh, LOG_ERR,
                       "bad argument %s: pam_sharedmode takes socket=/PATH, helper=/PATH, "
                       "flow=password|nativeAuth|deviceCode, app=ID, timeout=SECONDS and debug",
                       argument);
            return PAM_SERVICE_ERR;
        }
    }
    return PAM_SUCCESS;
}

/* Milliseconds left until `deadline` (0 when it passed), at most INT_MAX. */
static int remaining_ms(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long left = (long long)(deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
    if (left <= 0) return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/*
 * Starts the helper with `argv` (argv[0] its path): a clean environment, the socketpair as descriptor 3,
 * /dev/null on standard input and output (and error, unless debug), every other descriptor closed.
 * Only async-signal-safe calls run between fork and exec: the host may have threads of its own.
 */
static int spawn_helper(pam_handle_t *pamh, const struct options *options, char *const argv[], struct helper *helper) {
    static char *const environment[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", NULL};
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        pam_syslog(pamh, LOG_ERR, "cannot create a socketpair for the helper: %m");
        return -1;
    }
    struct rlimit limit;
    int highest = 65536;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < 1048576)
        highest = (int)limit.rlim_cur;
    pid_t pid = fork();
    if (pid < 0) {
        pam_syslog(pamh, LOG_ERR, "cannot start the helper %s: %m", argv[0]);
        close(pair[0]);
        close(pair[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction standard;
        memset(&standard, 0, sizeof(standard));
        standard.sa_handler = SIG_DFL;
        for (int signal_number = 1; signal_number < NSIG; signal_number++) sigaction(signal_number, &standard, NULL);
        /* Out of the way first: the host may have closed its standard descriptors. */
        int channel = fcntl(pair[1], F_DUPFD, 10);
        int null_device = open("/dev/null", O_RDWR);
        int quiet = null_device < 0 ? -1 : fcntl(null_device, F_DUPFD, 10);
        if (channel < 0 || quiet < 0) _exit(127);
        if (dup2(quiet, 0) < 0 || dup2(quiet, 1) < 0) _exit(127);
        if (!options->debug && dup2(quiet, 2) < 0) _exit(127);
        if (dup2(channel, PAM_SHAREDMODE_HELPER_FD) < 0) _exit(127);
        if (syscall(SYS_close_range, PAM_SHAREDMODE_HELPER_FD + 1, ~0U, 0) != 0) {
            for (int descriptor = PAM_SHAREDMODE_HELPER_FD + 1; descriptor < highest; descriptor++) close(descriptor);
        }
        execve(argv[0], argv, environment);
        _exit(127);
    }
    close(pair[1]);
    helper->pid = pid;
    helper->fd = pair[0];
    helper->used = 0;
    clock_gettime(CLOCK_MONOTONIC, &helper->deadline);
    helper->deadline.tv_sec += options->timeout;
    return 0;
}

/*
 * Ends the helper: its channel closed, then reaped by its pid. One that has not exited within the grace
 * (or by the call's deadline, when `kill_now`) is killed with SIGKILL first. No zombie is left either way.
 */
static void end_helper(struct helper *helper, int kill_now) {
    if (helper->fd >= 0) {
        close(helper->fd);
        helper->fd = -1;
    }
    wipe(helper->buffer, sizeof(helper->buffer));
    if (helper->pid <= 0) return;
    int status;
    if (!kill_now) {
        struct timespec grace;
        clock_gettime(CLOCK_MONOTONIC, &grace);
        grace.tv_sec += EXIT_GRACE_MS / 1000;
        for (;;) {
            pid_t done = waitpid(helper->pid, &status, WNOHANG);
            if (done == helper->pid || (done < 0 && errno != EINTR)) {
                helper->pid = -1;
                return;
            }
            if (remaining_ms(&grace) == 0) break;
            poll(NULL, 0, 10);
        }
    }
    kill(helper->pid, SIGKILL);
    while (waitpid(helper->pid, &status, 0) < 0 && errno == EINTR) {
    }
    helper->pid = -1;
}

/* Reads the next line (without its '\n') into `line`: 1, or 0 at the end, -1 at the deadline, -2 on a
 * line too long or a read error. */
static int read_line(struct helper *helper, char *line) {
    for (;;) {
        char *newline = memchr(helper->buffer, '\n', helper->used);
        if (newline != NULL) {
            size_t length = (size_t)(newline - helper->buffer);
            memcpy(line, helper->buffer, length);
            line[length] = '\0';
            size_t rest = helper->used - length - 1;
            memmove(helper->buffer, newline + 1, rest);
            wipe(helper->buffer + rest, helper->used - rest);
            helper->used = rest;
            return 1;
        }
        if (helper->used == sizeof(helper->buffer)) return -2;
        struct pollfd entry = {.fd = helper->fd, .events = POLLIN};
        int ready = poll(&entry, 1, remaining_ms(&helper->deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return -2;
        if (ready == 0) return -1;
        ssize_t count = read(helper->fd, helper->buffer + helper->used, sizeof(helper->buffer) - helper->used);
        if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (count < 0) return -2;
        if (count == 0) return 0;
        helper->used += (size_t)count;
    }
}

/* Sends `word` and `text` as one line; 0, or -1 when the helper is gone or the deadline passed. */
static int send_line(struct helper *helper, const char *word, const char *text) {
    char line[PAM_SHAREDMODE_MAX_LINE];
    int length = snprintf(line, sizeof(line), text == NULL ? "%s\n" : "%s %s\n", word, text);
    int result = 0;
    if (length < 0 || (size_t)length >= sizeof(line) || (text != NULL && strchr(text, '\n') != NULL)) {
        result = -1;
    } else {
        size_t sent = 0;
        while (sent < (size_t)length) {
            struct pollfd entry = {.fd = helper->fd, .events = POLLOUT};
            int ready = poll(&entry, 1, remaining_ms(&helper->deadline));
            if (ready < 0 && errno == EINTR) continue;
            if (ready <= 0) {
                result = -1;
                break;
            }
            ssize_t count = send(helper->fd, line + sent, (size_t)length - sent, MSG_NOSIGNAL);
            if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (count < 0) {
                result = -1;
                break;
            }
            sent += (size_t)count;
        }
    }
    wipe(line, sizeof(line));
    return result;
}

static const struct {
    const char *name;
    int code;
} result_names[] = {
    {"PAM_SUCCESS", PAM_SUCCESS},
    {"PAM_AUTH_ERR", PAM_AUTH_ERR},
    {"PAM_AUTHINFO_UNAVAIL", PAM_AUTHINFO_UNAVAIL},
    {"PAM_USER_UNKNOWN", PAM_USER_UNKNOWN},
    {"PAM_MAXTRIES", PAM_MAXTRIES},
    {"PAM_CRED_INSUFFICIENT", PAM_CRED_INSUFFICIENT},
    {"PAM_PERM_DENIED", PAM_PERM_DENIED},
    {"PAM_SESSION_ERR", PAM_SESSION_ERR},
    {"PAM_SERVICE_ERR", PAM_SERVICE_ERR},
    {"PAM_SYSTEM_ERR", PAM_SYSTEM_ERR},
    {"PAM_CONV_ERR", PAM_CONV_ERR},
    {"PAM_ABORT", PAM_ABORT},
    {"PAM_IGNORE", PAM_IGNORE},
};

static int result_code(const char *name, int failure) {
    for (size_t index = 0; index < sizeof(result_names) / sizeof(result_names[0]); index++) {
        if (strcmp(result_names[index].name, name) == 0) return result_names[index].code;
    }
    return failure;
}

/* Asks the user through the application's conversation; the answer (malloc'd) in `answer`. */
static int ask(pam_handle_t *pamh, int style, const char *prompt, char **answer) {
    *answer = NULL;
    int status = pam_prompt(pamh, style, answer, "%s", prompt);
    if (status != PAM_SUCCESS) free_text(answer);
    return status == PAM_SUCCESS && *answer != NULL ? PAM_SUCCESS : PAM_CONV_ERR;
}

static int starts_with(const char *line, const char *word, const char **rest) {
    size_t length = strlen(word);
    if (strncmp(line, word, length) != 0 || line[length] != ' ') return 0;
    *rest = line + length + 1;
    return 1;
}

static int keep(char **slot, const char *text) {
    free_text(slot);
    *slot = strdup(text);
    return *slot == NULL ? -1 : 0;
}

/*
 * Runs the helper with `argv` and relays its conversation until its result; `failure` is the code for
 * the helper's own trouble (it cannot start, stops without a result, overruns the cap).
 */
static int run_helper(pam_handle_t *pamh, const struct options *options, char *const argv[], int failure,
                      struct report *report) {
    struct helper helper = {.pid = -1, .fd = -1};
    struct sigaction default_child, saved_child;
    memset(&default_child, 0, sizeof(default_child));
    default_child.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &default_child, &saved_child);

    int result = failure;
    if (spawn_helper(pamh, options, argv, &helper) != 0) {
        pam_error(pamh, "The sign-in service's helper %s could not be started.", options->helper);
        sigaction(SIGCHLD, &saved_child, NULL);
        return failure;
    }
    char line[PAM_SHAREDMODE_MAX_LINE];
    int finished = 0, kill_now = 0;
    while (!finished) {
        int got = read_line(&helper, line);
        if (got <= 0) {
            if (got == -1) {
                pam_syslog(pamh, LOG_ERR, "the helper %s took longer than %d seconds: killed", options->helper,
                           options->timeout);
                pam_error(pamh, "The sign-in took longer than %d seconds and was stopped. Try again.",
                          options->timeout);
            } else {
                pam_syslog(pamh, LOG_ERR, "the helper %s stopped without a result", options->helper);
                pam_error(pamh, "The sign-in service's helper %s stopped unexpectedly.", options->helper);
            }
            kill_now = 1;
            break;
        }
        const char *text;
        if (starts_with(line, "prompt-echo-off", &text) || starts_with(line, "prompt-echo-on", &text)) {
            int style = line[strlen("prompt-echo-o")] == 'f' ? PAM_PROMPT_ECHO_OFF : PAM_PROMPT_ECHO_ON;
            char *answer = NULL;
            int asked = ask(pamh, style, text, &answer);
            int sent = asked == PAM_SUCCESS ? send_line(&helper, "response", answer) : send_line(&helper, "cancel", NULL);
            free_text(&answer);
            if (sent != 0) {
                kill_now = 1;
                break;
            }
        } else if (starts_with(line, "info", &text)) {
            pam_info(pamh, "%s", text);
        } else if (starts_with(line, "error", &text)) {
            pam_error(pamh, "%s", text);
        } else if (starts_with(line, "set-user", &text)) {
            if (keep(&report->user, text) != 0) break;
        } else if (starts_with(line, "set-worker", &text)) {
            if (keep(&report->worker, text) != 0) break;
        } else if (starts_with(line, "set-correlation", &text)) {
            if (keep(&report->correlation, text) != 0) break;
        } else if (starts_with(line, "result", &text)) {
            result = result_code(text, failure);
            finished = 1;
        } else {
            pam_syslog(pamh, LOG_ERR, "the helper %s sent a line this module does not know", options->helper);
            kill_now = 1;
            break;
        }
    }
    wipe(line, sizeof(line));
    end_helper(&helper, kill_now);
    sigaction(SIGCHLD, &saved_child, NULL);
    return finished ? result : failure;
}

/* The helper's command line: argv[0] the helper, then `command`, then the socket if one was named. */
struct arguments {
    int count;
    char *values[MAX_ARGS + 1];
};

static void add(struct arguments *arguments, const char *flag, const char *value) {
    if (value == NULL || arguments->count + 2 > MAX_ARGS) return;
    if (flag != NULL) arguments->values[arguments->count++] = (char *)flag;
    arguments->values[arguments->count++] = (char *)value;
    arguments->values[arguments->count] = NULL;
}

static const char *item(pam_handle_t *pamh, int type) {
    const void *value = NULL;
    if (pam_get_item(pamh, type, &value) != PAM_SUCCESS || value == NULL || *(const char *)value == '\0') return NULL;
    return value;
}

static void base_arguments(pam_handle_t *pamh, const struct options *options, const char *command,
                           struct arguments *arguments) {
    arguments->count = 0;
    add(arguments, NULL, options->helper);
    add(arguments, NULL, command);
    add(arguments, "--socket", options->socket);
    const char *service = item(pamh, PAM_SERVICE);
    add(arguments, "--service", service == NULL ? "unknown" : service);
    add(arguments, "--tty", item(pamh, PAM_TTY));
    add(arguments, "--rhost", item(pamh, PAM_RHOST));
    add(arguments, "--seat", pam_getenv(pamh, "XDG_SEAT"));
}

/* A name the worker may have typed: printable, no blanks, not too long. */
static int plausible_name(const char *name) {
    size_t length = strlen(name);
    if (length == 0 || length > 256) return 0;
    for (const unsigned char *byte = (const unsigned char *)name; *byte != '\0'; byte++) {
        if (*byte <= ' ' || *byte == 0x7f) return 0;
    }
    return 1;
}

EXPORTED int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    int status = parse_options(pamh, argc, argv, &options);
    if (status != PAM_SUCCESS) return status;
    pam_set_data(pamh, SIGNIN_DATA, NULL, NULL);

    const char *user = NULL;
    status = pam_get_user(pamh, &user, NULL);
    if (status != PAM_SUCCESS) return status;
    if (user == NULL || !plausible_name(user)) return PAM_USER_UNKNOWN;
    /* A local account's name (an administrator's, root's) is never a worker's: the next module decides. */
    if (strcmp(user, "root") == 0 || pam_modutil_getpwnam(pamh, user) != NULL) {
        if (options.debug) pam_syslog(pamh, LOG_DEBUG, "%s is a local account: passed to the next module", user);
        return PAM_USER_UNKNOWN;
    }

    struct arguments arguments;
    base_arguments(pamh, &options, "authenticate", &arguments);
    add(&arguments, "--user", user);
    add(&arguments, "--flow", options.flow);
    add(&arguments, "--app", options.app);
    struct report report = {0};
    status = run_helper(pamh, &options, arguments.values, PAM_AUTHINFO_UNAVAIL, &report);
    if (status == PAM_SUCCESS) {
        if (report.user == NULL || report.correlation == NULL || !plausible_name(report.user)) {
            pam_syslog(pamh, LOG_ERR, "the helper reported a sign-in without the session's user or correlation id");
            status = PAM_AUTHINFO_UNAVAIL;
        } else {
            struct signin *signin = calloc(1, sizeof(*signin));
            if (signin == NULL) {
                status = PAM_BUF_ERR;
            } else {
                signin->worker = report.worker;
                signin->correlation = report.correlation;
                report.worker = NULL;
                report.correlation = NULL;
                status = pam_set_item(pamh, PAM_USER, report.user);
                if (status == PAM_SUCCESS) status = pam_set_data(pamh, SIGNIN_DATA, signin, free_signin);
                else free_signin(pamh, signin, 0);
                if (status == PAM_SUCCESS && options.debug)
                    pam_syslog(pamh, LOG_DEBUG, "worker signed in; the session opens as %s", report.user);
            }
        }
    }
    free_report(&report);
    return status;
}

EXPORTED int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    (void)argc;
    (void)argv;
    const void *data = NULL;
    return pam_get_data(pamh, SIGNIN_DATA, &data) == PAM_SUCCESS && data != NULL ? PAM_SUCCESS : PAM_IGNORE;
}

EXPORTED int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh;
    (void)flags;
    (void)argc;
    (void)argv;
    return PAM_IGNORE;
}

EXPORTED int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    int status = parse_options(pamh, argc, argv, &options);
    if (status != PAM_SUCCESS) return status;
    const void *data = NULL;
    if (pam_get_data(pamh, SIGNIN_DATA, &data) != PAM_SUCCESS || data == NULL) return PAM_IGNORE;
    struct signin *signin = (struct signin *)data;
    const char *session_id = pam_getenv(pamh, "XDG_SESSION_ID");
    if (session_id == NULL || *session_id == '\0') {
        pam_syslog(pamh, LOG_ERR, "no XDG_SESSION_ID: pam_systemd must come before pam_sharedmode in the stack");
        pam_error(pamh, "The login session has no logind session id: pam_systemd must come before "
                        "pam_sharedmode in the PAM stack's session phase.");
        return PAM_SESSION_ERR;
    }
    if (keep(&signin->session_id, session_id) != 0) return PAM_BUF_ERR;
    const char *user = item(pamh, PAM_USER);
    struct arguments arguments;
    base_arguments(pamh, &options, "open-session", &arguments);
    add(&arguments, "--session-id", signin->session_id);
    add(&arguments, "--correlation-id", signin->correlation);
    add(&arguments, "--user", user);
    struct report report = {0};
    status = run_helper(pamh, &options, arguments.values, PAM_SESSION_ERR, &report);
    free_report(&report);
    return status;
}

EXPORTED int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    int status = parse_options(pamh, argc, argv, &options);
    if (status != PAM_SUCCESS) return status;
    const void *data = NULL;
    if (pam_get_data(pamh, SIGNIN_DATA, &data) != PAM_SUCCESS || data == NULL) return PAM_IGNORE;
    const struct signin *signin = data;
    const char *session_id = signin->session_id != NULL ? signin->session_id : pam_getenv(pamh, "XDG_SESSION_ID");
    if (session_id == NULL || *session_id == '\0') return PAM_IGNORE;
    struct arguments arguments;
    base_arguments(pamh, &options, "close-session", &arguments);
    add(&arguments, "--session-id", session_id);
    add(&arguments, "--user", item(pamh, PAM_USER));
    struct report report = {0};
    status = run_helper(pamh, &options, arguments.values, PAM_SESSION_ERR, &report);
    free_report(&report);
    return status;
}
