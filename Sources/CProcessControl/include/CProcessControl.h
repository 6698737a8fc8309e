#ifndef CPROCESSCONTROL_H
#define CPROCESSCONTROL_H

/// prctl(PR_SET_DUMPABLE, dumpable): whether the process may leave a core file and whose ptrace (and
/// /proc/PID/mem reads) it accepts without CAP_SYS_PTRACE. Returns 0, or -1 with errno set.
/// (prctl is variadic, which Swift cannot call.)
int process_control_set_dumpable(int dumpable);

#endif
