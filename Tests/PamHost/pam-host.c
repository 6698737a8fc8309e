/*
 * A PAM application for PamModuleTests: pam-host SERVICE USER ANSWER [TTY] authenticates USER through
 * SERVICE (on terminal TTY, PAM_TTY, when given), answering every prompt with ANSWER, then reports what a host process must see after the module ran:
 *   message STYLE TEXT      every message of the conversation
 *   result TEXT             pam_strerror of pam_authenticate's result
 *   user NAME               PAM_USER afterwards (the session's user once a worker signed in)
 *   threads N               the threads of this process (1: the module left none)
 *   children none|left      whether a child of this process is left (running or a zombie)
 *   descriptors kept|leaked whether pam_authenticate left a descriptor open
 * ANSWER `@FILE` reads the answer from FILE (then removed) and wipes it after pam_authenticate; with
 * PAM_HOST_PAUSE set it then prints `paused` and waits for a signal, for a scan of its memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include <security/pam_appl.h>

static int conversation(int count, const struct pam_message **messages, struct pam_response **responses,
                        void *answer) {
    struct pam_response *replies = calloc((size_t)count, sizeof(*replies));
    if (replies == NULL) return PAM_BUF_ERR;
    for (int index = 0; index < count; index++) {
        const struct pam_message *message = messages[index];
        printf("message %d %s\n", message->msg_style, message->msg);
        if (message->msg_style == PAM_PROMPT_ECHO_OFF || message->msg_style == PAM_PROMPT_ECHO_ON)
            replies[index].resp = strdup(answer);
    }
    fflush(stdout);
    *responses = replies;
    return PAM_SUCCESS;
}

static int threads(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    int count = -1;
    while (status != NULL && fgets(line, sizeof(line), status) != NULL) {
        if (sscanf(line, "Threads: %d", &count) == 1) break;
    }
    if (status != NULL) fclose(status);
    return count;
}

static int descriptors(void) {
    DIR *directory = opendir("/proc/self/fd");
    int count = 0;
    while (directory != NULL && readdir(directory) != NULL) count++;
    if (directory != NULL) closedir(directory);
    return count;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: pam-host SERVICE USER ANSWER [TTY]\n");
        return 64;
    }
    static char answer[256];
    if (argv[3][0] == '@') {
        int file = open(argv[3] + 1, O_RDONLY);
        ssize_t length = file < 0 ? -1 : read(file, answer, sizeof(answer) - 1);
        if (file >= 0) close(file);
        unlink(argv[3] + 1);
        if (length < 0) return 66;
        answer[length] = '\0';
        answer[strcspn(answer, "\n")] = '\0';
    } else {
        snprintf(answer, sizeof(answer), "%s", argv[3]);
    }
    struct pam_conv conv = {conversation, answer};
    pam_handle_t *handle = NULL;
    int status = pam_start(argv[1], argv[2], &conv, &handle);
    if (status != PAM_SUCCESS) {
        fprintf(stderr, "pam_start: %d\n", status);
        return 70;
    }
    if (argc == 5) pam_set_item(handle, PAM_TTY, argv[4]);
    int before = descriptors();
    status = pam_authenticate(handle, 0);
    int after = descriptors();
    explicit_bzero(answer, sizeof(answer));
    printf("result %s\n", pam_strerror(handle, status));
    const void *user = NULL;
    pam_get_item(handle, PAM_USER, &user);
    printf("user %s\n", user == NULL ? "(none)" : (const char *)user);
    printf("threads %d\n", threads());
    int child;
    pid_t left = waitpid(-1, &child, WNOHANG);
    printf("children %s\n", left < 0 && errno == ECHILD ? "none" : "left");
    printf("descriptors %s\n", before == after ? "kept" : "leaked");
    pam_end(handle, status);
    if (getenv("PAM_HOST_PAUSE") != NULL) {
        printf("paused\n");
        fflush(stdout);
        pause();
    }
    return 0;
}
