#include "CProcessControl.h"

#include <sys/prctl.h>

int process_control_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}
