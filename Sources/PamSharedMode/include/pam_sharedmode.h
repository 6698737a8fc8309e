/*
 * pam_sharedmode: workers sign in at the login screen through deviced.
 *
 * The module is loaded into the greeter's or login's process, so it stays small: no Swift runtime, no
 * threads. It relays the PAM conversation to a helper executable it spawns for each call
 * (`sharedmode-pam-helper`, which speaks varlink to deviced) over a socketpair, one line at a time.
 *
 * The line protocol (every line at most PAM_SHAREDMODE_MAX_LINE bytes with its '\n'; no line holds a '\n'):
 *
 *   helper -> module
 *     prompt-echo-off TEXT   ask the user (PAM_PROMPT_ECHO_OFF); the module answers `response` or `cancel`
 *     prompt-echo-on TEXT    ask the user (PAM_PROMPT_ECHO_ON); likewise
 *     info TEXT              show TEXT (PAM_TEXT_INFO)
 *     error TEXT             show TEXT (PAM_ERROR_MSG)
 *     set-user NAME          the session's user (PAM_USER after a successful authentication)
 *     set-worker NAME        the worker signed in (kept for the session phase)
 *     set-correlation ID     the sign-in's correlation id (OpenLoginSession takes it)
 *     result CODE            the last line: PAM_SUCCESS, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, ...
 *
 *   module -> helper
 *     response TEXT          what the user typed (wiped from the module's buffers once sent)
 *     cancel                 the conversation failed: the helper gives up
 *
 * The helper's command line: HELPER authenticate|open-session|close-session with --socket, --service,
 * --tty, --seat, --rhost, --user, --flow, --app, --session-id and --correlation-id as the call needs; the
 * socketpair is its descriptor 3, its standard input and output are /dev/null.
 */
#ifndef PAM_SHAREDMODE_H
#define PAM_SHAREDMODE_H

/* The longest line either side sends, its '\n' included. */
#define PAM_SHAREDMODE_MAX_LINE 4096

/* The helper's descriptor for the socketpair. */
#define PAM_SHAREDMODE_HELPER_FD 3

/* The helper when no `helper=` argument names one. */
#ifndef PAM_SHAREDMODE_DEFAULT_HELPER
#define PAM_SHAREDMODE_DEFAULT_HELPER "/usr/libexec/sharedmode/pam-helper"
#endif

/* How long one call may take in all (seconds) when no `timeout=` argument says: a device-code sign-in
 * waits for the worker on another device, up to the code's lifetime. */
#define PAM_SHAREDMODE_DEFAULT_TIMEOUT 900

#endif
