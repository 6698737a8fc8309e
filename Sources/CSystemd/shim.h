// sd-bus from libsystemd, for the MSAL bridge's session-bus service.
#include <systemd/sd-bus.h>
