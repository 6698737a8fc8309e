#include "CProcessControl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

int process_control_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}

int process_control_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int process_control_pidfd_getfd(int pidfd, int targetfd) {
    return (int)syscall(SYS_pidfd_getfd, pidfd, targetfd, 0);
}

/// The parent-death signal of the main thread when the process started (a thread attribute: the Swift code
/// runs on other threads, which have none).
static int started_with_parent_death_signal = 0;

/// Runs on the main thread before Swift's main: a parent-death signal carried across the daemon's own
/// restart (PROCESS_CONTROL_PARENT_DEATH_VARIABLE, "SIGNAL:PARENT_PID") is set again, and delivered at once
/// when that parent is gone already; then the main thread's signal is recorded for the next restart.
__attribute__((constructor)) static void process_control_start(void) {
    const char *carried = getenv(PROCESS_CONTROL_PARENT_DEATH_VARIABLE);
    if (carried != NULL) {
        int signal = 0, parent = 0;
        int parsed = sscanf(carried, "%d:%d", &signal, &parent);
        unsetenv(PROCESS_CONTROL_PARENT_DEATH_VARIABLE);
        if (parsed == 2 && signal > 0 && signal < NSIG) {
            (void)prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL);
            if (getppid() != parent) raise(signal);
        }
    }
    (void)prctl(PR_GET_PDEATHSIG, &started_with_parent_death_signal, 0UL, 0UL, 0UL);
}

int process_control_parent_death_signal(void) {
    return started_with_parent_death_signal;
}
