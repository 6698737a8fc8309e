#ifndef CPROCESSCONTROL_H
#define CPROCESSCONTROL_H

/// prctl(PR_SET_DUMPABLE, dumpable): whether the process may leave a core file and whose ptrace (and
/// /proc/PID/mem reads) it accepts without CAP_SYS_PTRACE. Returns 0, or -1 with errno set.
/// (prctl is variadic, which Swift cannot call.)
int process_control_set_dumpable(int dumpable);

/// pidfd_open(pid, 0) (Linux 5.3): a descriptor of process `pid` that stays that process's, whatever the pid
/// becomes later. Returns it, or -1 with errno set (ESRCH: no such process; ENOSYS: an older kernel).
/// (syscall is variadic, which Swift cannot call.)
int process_control_pidfd_open(int pid);

/// pidfd_getfd(pidfd, targetfd, 0) (Linux 5.6): a copy, in this process and close-on-exec, of descriptor
/// `targetfd` of the process `pidfd` names; the caller needs ptrace access to that process
/// (PTRACE_MODE_ATTACH_REALCREDS: CAP_SYS_PTRACE for another user's). Returns it, or -1 with errno set
/// (EBADF: no such descriptor there; EPERM: no ptrace access; ESRCH: the process is gone; ENOSYS: an older
/// kernel). (syscall is variadic, which Swift cannot call.)
int process_control_pidfd_getfd(int pidfd, int targetfd);

/// The environment variable that carries the parent-death signal across the daemon's restart of itself
/// ("SIGNAL:PARENT_PID"): the kernel keeps it per thread, and the restart's execve runs on a thread of the
/// Swift runtime, not on the main thread a `setpriv --pdeathsig` or PR_SET_PDEATHSIG gave it to.
#define PROCESS_CONTROL_PARENT_DEATH_VARIABLE "DEVICED_PARENT_DEATH_SIGNAL"

/// The parent-death signal the main thread had when the process started (0: none). Set again on the main
/// thread before Swift's main when carried across a restart (PROCESS_CONTROL_PARENT_DEATH_VARIABLE).
int process_control_parent_death_signal(void);

#endif
