# shellcheck shell=bash
# tools/systemtest's kiosk session checks (issue 34), sourced by it once the container runs and the package
# was purged (it installs, provisions and purges again, so the next section starts where it did): uses its
# inside, as_app, check, wait_until, now_ms, $work, $pid1 and $deb; sets login_ms, session_end_ms and
# idle_end_ms.
# Needs the identity provider's relay socket at /srv/sharedmode-idp/relay.sock inside the container.

kiosk_worker=worker2
kiosk_password=worker2-password
kiosk_grace=3

# The login screen's policy with the kiosk user, the provider's password client and a short grace; a second
# one with the shortest idle sign-out.
# A third signs workers in with a one-time code (native authentication) at the stand-in's tenant.
python3 - policies/kiosk-login.json policies/kiosk-password.json "$work/root/root" "$kiosk_grace" "$standin_tenant" <<'PY'
import copy, json, sys
login, password, out, grace = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
native = copy.deepcopy(login)
login["authority"] = password["authority"]
if "password" not in login["authority"]["flows"]:
    login["authority"]["flows"].append("password")
login["apps"] = password["apps"]
session = login.setdefault("session", {})
session.update({"user": "kiosk", "onSignOut": "terminate", "terminateGraceSeconds": grace})
session.pop("app", None)
json.dump(login, open(out + "/kiosk-login.json", "w"), indent=2)
session["idleSignOutSeconds"] = 30
session["warningSeconds"] = 10
login["id"] = login["id"] + "-idle"
json.dump(login, open(out + "/kiosk-login-idle.json", "w"), indent=2)
native["id"] = native["id"] + "-native"
native["authority"] = {"issuer": "https://contoso.ciamlogin.com/" + sys.argv[5], "clientId": "kiosk-apps",
                       "scopes": ["openid", "profile", "offline_access", "User.Read", "Files.Read"],
                       "flows": ["nativeAuth"]}
native["apps"] = json.load(open("policies/kiosk.json"))["apps"]
native.setdefault("session", {}).update({"user": "kiosk", "onSignOut": "terminate", "terminateGraceSeconds": grace})
native["session"].pop("app", None)
json.dump(native, open(out + "/kiosk-login-native.json", "w"), indent=2)
PY
# They hold the provider's client secret: root's alone, as devicectl provision insists.
chmod 600 "$work/root/root/kiosk-login.json" "$work/root/root/kiosk-login-idle.json"

# Drives `login` on a pseudo-terminal as a person would: the worker's name, the password (or the one-time
# code) at the module's prompt, then commands in the kiosk user's shell; records when Enter was pressed and
# the session's id; types `exit` once /root/<name>.logout exists. Runs as a transient service (a cgroup of
# the container's).
cat > "$work/root/root/kiosk-login.py" <<'PY'
import json, os, pty, select, sys, time
# The secret comes in a file (root's, removed once read): a transient unit's command line is in the journal.
user, name = sys.argv[1], sys.argv[3]
with open(sys.argv[2]) as f:
    password = f.read().rstrip("\n")
os.unlink(sys.argv[2])
prompt = sys.argv[4].encode() if len(sys.argv) > 4 else b"Password: "
record, events, buffer = "/root/%s.json" % name, {}, b""
def note(key, value=None):
    events[key] = time.monotonic() if value is None else value
    with open(record + ".tmp", "w") as f: json.dump(events, f)
    os.replace(record + ".tmp", record)
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/login", ["login"])
def expect(pattern, timeout=300):
    global buffer
    deadline = time.monotonic() + timeout
    while pattern not in buffer:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            note("error", "no %r within %d s; the terminal showed %r" % (pattern, timeout, buffer[-400:].decode(errors="replace")))
            sys.exit(1)
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            note("ended")
            note("transcript", buffer[-400:].decode(errors="replace"))
            sys.exit(0)
        buffer += data
    end = buffer.index(pattern) + len(pattern)
    seen, buffer = buffer[:end], buffer[end:]
    return seen
expect(b"login: ")
os.write(fd, user.encode() + b"\n")
expect(prompt)
os.write(fd, password.encode() + b"\n")
note("enter")
expect(b"$ ", 300)  # the kiosk user's shell (what is typed before it runs is flushed)
# What a worker leaves in the kiosk user's home (resetHome must take it away): a file, and a symlink to a
# directory outside the home (the reset must not follow it).
os.write(fd, b"echo left-by-the-worker > ~/notes-%s; ln -s /var/tmp/outside-home ~/outside-%s\n" % (name.encode(), name.encode()))
# A process that ignores SIGTERM (and the SIGHUP systemd sends a session's scope too) and one that does
# not, then the session's id.
os.write(fd, b"sh -c \"trap '' TERM HUP; exec sleep 100000\" & sleep 100001 & echo SESSION=\"$XDG_SESSION_ID\".\n")
seen = expect(b".\r\n", 120)
while b"SESSION=" not in seen or seen.endswith(b'SESSION="$XDG_SESSION_ID".\r\n'):
    seen = expect(b".\r\n", 120)
note("session", seen.split(b"SESSION=")[-1].split(b".")[0].decode())
while not os.path.exists("/root/%s.logout" % name):
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            note("ended")
            sys.exit(0)
os.write(fd, b"exit\n")
# Until login exits (the session's background processes may keep the terminal open after it).
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            os.read(fd, 4096)
        except OSError:
            pass
note("ended")
PY

# sign_in_at_login NAME [USER SECRET PROMPT]: starts the driver (kiosk_worker and its password by default);
# waits for the session; sets kiosk_session (its id) and kiosk_enter_ms (the secret's Enter to logind's
# session start).
kiosk_session=""
kiosk_enter_ms=""
driver_field() { inside python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "/root/$1.json" "$2" 2>/dev/null; }
driver_has() { [ -n "$(driver_field "$1" "$2")" ]; }
driver_done_signing_in() { driver_has "$1" session || driver_has "$1" error || driver_has "$1" ended; }
sign_in_at_login() {
  local name="$1"
  kiosk_session=""
  kiosk_enter_ms=""
  printf '%s\n' "${3:-$kiosk_password}" > "$work/root/root/$name.secret"
  chmod 600 "$work/root/root/$name.secret"
  inside systemd-run --quiet --unit="sharedmode-$name" python3 /root/kiosk-login.py "${2:-$kiosk_worker}" \
    "/root/$name.secret" "$name" "${4:-Password: }"
  wait_until 300 driver_done_signing_in "$name" || true
  kiosk_session="$(driver_field "$name" session)"
  [ -n "$kiosk_session" ] || { echo "systemtest: $name: $(driver_field "$name" error)$(driver_field "$name" transcript)" >&2; return 1; }
  local enter started
  enter="$(driver_field "$name" enter)"
  started="$(inside loginctl show-session "$kiosk_session" -p TimestampMonotonic --value)"
  kiosk_enter_ms="$(python3 -c 'import sys; print(round(int(sys.argv[2]) / 1000 - float(sys.argv[1]) * 1000))' "$enter" "$started")"
}
session_is_kiosk_users() {
  [ "$(inside loginctl show-session "$kiosk_session" -p Name --value 2>/dev/null)" = kiosk ] \
    && inside loginctl list-sessions --no-legend | awk '{print $1, $3}' | grep -qx "$kiosk_session kiosk"
}
# The session's processes (its scope's cgroup, whichever hierarchies the container has).
session_cgroup() { inside systemctl show -p ControlGroup --value "session-$kiosk_session.scope" 2>/dev/null; }
session_pids() {
  local cgroup="$1" base
  for base in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if inside test -f "$base$cgroup/cgroup.procs"; then inside cat "$base$cgroup/cgroup.procs"; return 0; fi
  done
}
# in_session UID COMMAND: runs COMMAND as UID inside the session's scope (an app the session started).
in_session() {
  local uid="$1" cgroup; shift
  cgroup="$(session_cgroup)"
  inside sh -c 'for base in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
      [ -f "$base$1/cgroup.procs" ] && echo $$ > "$base$1/cgroup.procs"; done; shift
      exec setpriv --reuid="$0" --regid="$0" --clear-groups "$@"' "$uid" "$cgroup" "$@"
}
all_gone() { local pid; for pid in "$@"; do ! inside test -d "/proc/$pid" || return 1; done; }
session_gone() { ! inside loginctl show-session "$kiosk_session" >/dev/null 2>&1 || [ "$(inside loginctl show-session "$kiosk_session" -p State --value 2>/dev/null)" = closing ]; }
audit_field() {  # audit_field TYPE FIELD: FIELD of the last journal entry of audit event TYPE
  inside journalctl --no-pager -q -o json "SHAREDMODE_AUDIT_TYPE=$1" 2>/dev/null | tail -n 1 \
    | python3 -c 'import json,sys; line=sys.stdin.read().strip(); print(json.loads(line).get(sys.argv[1], "") if line else "")' "$2"
}

audit_count() { inside journalctl --no-pager -q -o cat "SHAREDMODE_AUDIT_TYPE=$1" 2>/dev/null | wc -l; }
# start_session_app MARK: an app (uid 1001) started in the session that gets the worker's token, then holds
# it (sleep MARK); its status in /tmp/in-session-token-MARK.status. Sets session_app (nsenter's pid here).
session_app=""
start_session_app() {
  # (Its end by the session's SIGTERM is expected: the subshell's "Terminated" notice is not shown.)
  in_session 1001 sh -c "devicectl token --scopes User.Read >/tmp/in-session-token-$1.out 2>&1; echo \$? >/tmp/in-session-token-$1.status; exec sleep $1" 2>/dev/null &
  session_app=$!
  wait_until 120 inside test -s "/tmp/in-session-token-$1.status" || true
  [ "$(inside cat "/tmp/in-session-token-$1.status" 2>/dev/null)" = 0 ]
}
stop_session_app() {  # (nsenter's half of the app on this side; gone with the app unless it outlived the session.)
  kill -KILL "$session_app" 2>/dev/null || true
  wait "$session_app" 2>/dev/null || true
}
# session_holds MARK PID...: among PIDs, the shell, the process ignoring SIGTERM (sleep 100000) and the app
# holding a token (uid 1001, sleep MARK).
session_holds() {
  local mark="$1" list; shift
  [ $# -ge 4 ] || return 1
  list="$(inside ps -o uid=,args= -p "$(IFS=,; echo "$*")")"
  grep -q 'sleep 100000$' <<<"$list" && grep -Eq "^ *1001 +sleep $mark\$" <<<"$list" && grep -q 'bash' <<<"$list"
}
# same_correlation: the last sign-out and the last session.terminated share a correlation id (set in
# correlation_id).
correlation_id=""
same_correlation() {
  local signed_out terminated
  signed_out="$(audit_field account.signed_out SHAREDMODE_AUDIT_CORRELATION_ID)"
  terminated="$(audit_field session.terminated SHAREDMODE_AUDIT_CORRELATION_ID)"
  correlation_id="$terminated"
  [ -n "$signed_out" ] && [ "$signed_out" = "$terminated" ]
}
kiosk_home=/home/kiosk
home_left_by() { inside test -f "$kiosk_home/notes-$1" && inside test -L "$kiosk_home/outside-$1"; }
# home_reset_of NAME: nothing NAME's session left in the kiosk user's home, /etc/skel's files there, and
# the directory its symlink pointed at untouched.
home_reset_of() {
  ! inside test -e "$kiosk_home/notes-$1" && ! inside test -L "$kiosk_home/outside-$1" \
    && inside test -f "$kiosk_home/.bashrc" && inside test -f /var/tmp/outside-home/keep \
    && [ "$(inside stat -c %U "$kiosk_home")" = kiosk ]
}

# --- Install, the kiosk user, the relay, the login stack -------------------------------------------------------
inside env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /root/sharedmode.deb >>"$work/install.log" 2>&1
check "the package ships the PAM module, its helper and the stack (a conffile)" bash -c "
  nsenter -t $pid1 -a test -f /lib/x86_64-linux-gnu/security/pam_sharedmode.so &&
  nsenter -t $pid1 -a test -x /usr/libexec/sharedmode/pam-helper &&
  nsenter -t $pid1 -a dpkg-query -W -f='\${Conffiles}' sharedmode | grep -q /etc/pam.d/sharedmode-kiosk"
inside useradd --uid 1010 --create-home --shell /bin/bash kiosk
inside useradd --uid 1011 --create-home --shell /bin/bash admin
inside sh -c 'echo admin:admin-password | chpasswd'
# Where the sessions' symlinks point: root's, with a file the home's reset must leave alone.
inside mkdir -p /var/tmp/outside-home
inside touch /var/tmp/outside-home/keep
inside systemd-run --quiet --unit=sharedmode-idp-relay socat TCP-LISTEN:4593,bind=127.0.0.1,fork,reuseaddr \
  UNIX-CONNECT:/srv/sharedmode-idp/relay.sock
wait_until 120 inside bash -c 'exec 3<>/dev/tcp/127.0.0.1/4593' 2>/dev/null || true
check "the identity provider answers inside the container (relayed)" inside python3 -c \
  'import json,urllib.request; json.load(urllib.request.urlopen("http://127.0.0.1:4593/api/oidc/.well-known/openid-configuration", timeout=30))'
# login's stack: the kiosk stack in place of common-auth (it includes common-account and common-session).
inside sed -i -e 's/^@include common-auth$/@include sharedmode-kiosk/' -e '/^@include common-account$/d' \
  -e '/^@include common-session$/d' /etc/pam.d/login
check "devicectl provision (the login screen's policy: session.user kiosk)" inside devicectl provision --policy /root/kiosk-login.json >/dev/null

# --- pamtester's failure paths ------------------------------------------------------------------------------------
check "pamtester: a wrong password is PAM_AUTH_ERR" bash -c "[[ \"\$(nsenter -t $pid1 -a sh -c 'printf \"wrong-password\\n\" | pamtester sharedmode-kiosk $kiosk_worker authenticate 2>&1')\" == *'Authentication failure'* ]]"
check "pamtester: a local account's name passes through to pam_unix" bash -c "nsenter -t $pid1 -a sh -c 'printf \"admin-password\\n\" | pamtester sharedmode-kiosk admin authenticate 2>&1' | grep -q 'successfully authenticated'"
inside systemctl stop sharedmode-idp-relay.service
check "pamtester: the provider down is PAM_AUTHINFO_UNAVAIL" bash -c "nsenter -t $pid1 -a sh -c 'printf \"$kiosk_password\\n\" | pamtester sharedmode-kiosk $kiosk_worker authenticate 2>&1' | grep -q 'cannot retrieve authentication info'"
inside systemd-run --quiet --unit=sharedmode-idp-relay-2 socat TCP-LISTEN:4593,bind=127.0.0.1,fork,reuseaddr \
  UNIX-CONNECT:/srv/sharedmode-idp/relay.sock
wait_until 120 inside bash -c 'exec 3<>/dev/tcp/127.0.0.1/4593' 2>/dev/null || true
inside systemctl stop deviced.socket deviced.service
check "pamtester: deviced down is PAM_AUTHINFO_UNAVAIL" bash -c "nsenter -t $pid1 -a sh -c 'printf \"$kiosk_password\\n\" | pamtester sharedmode-kiosk $kiosk_worker authenticate 2>&1' | grep -q 'cannot retrieve authentication info'"
inside systemctl start deviced.socket
check "no password in the journal" bash -c "! nsenter -t $pid1 -a journalctl --no-pager -q -o export | grep -q '$kiosk_password\|wrong-password\|admin-password'"

# --- A worker signs in at `login`; the session's apps get the token; root's sign-out ends the session -----------
check "a worker signs in through login on a pseudo-terminal" sign_in_at_login shift1
login_ms="$kiosk_enter_ms"
check "logind has the kiosk user's session (loginctl list-sessions)" session_is_kiosk_users
check "an app in the session gets the worker's token silently" start_session_app 100002
check "an app user outside the session gets it too (single sign-on from the login prompt)" as_app 1002 devicectl token --scopes User.Read >/dev/null
wait_until 120 home_left_by shift1 || true
check "the session wrote into the kiosk user's home (a file and a symlink out of it)" home_left_by shift1
cgroup="$(session_cgroup)"
mapfile -t shift_pids < <(session_pids "$cgroup")
check "the session runs the shell, a process ignoring SIGTERM and the app holding a token (${#shift_pids[@]} processes)" \
  session_holds 100002 "${shift_pids[@]}"
signout_started=$(now_ms)
check "root's sign-out" inside devicectl signout --reason shift-end >/dev/null
wait_until 300 all_gone "${shift_pids[@]}" || true
session_end_ms=$(( $(now_ms) - signout_started ))
check "every process of the session is gone, the one ignoring SIGTERM and the token holder included" all_gone "${shift_pids[@]}"
check "within the grace plus a margin (${session_end_ms} ms; grace ${kiosk_grace} s + 10 s)" [ "$session_end_ms" -le $(( (kiosk_grace + 10) * 1000 )) ]
wait_until 120 session_gone || true
check "logind no longer has the session" session_gone
wait_until 120 same_correlation || true
check "the audit log has the sign-out and session.terminated under one correlation id ($correlation_id)" same_correlation
stop_session_app
check "the app outside the session has no token after the sign-out (exit 49: nobody signed in)" \
  bash -c "nsenter -t $pid1 -a setpriv --reuid=1002 --regid=1002 --clear-groups devicectl token --scopes User.Read >/dev/null 2>&1; [ \$? = 49 ]"

# --- Logging out signs the worker out ----------------------------------------------------------------------------------
check "the worker signs in at login again" sign_in_at_login shift2
check "resetHome: the next session starts in a fresh home (nothing the last one left, /etc/skel's files, the symlink's target kept)" \
  home_reset_of shift1
wait_until 120 home_left_by shift2 || true
check "the second session wrote into the fresh home" home_left_by shift2
inside touch /root/shift2.logout
wait_until 120 driver_has shift2 ended || true
wait_until 120 bash -c "nsenter -t $pid1 -a setpriv --reuid=1002 --regid=1002 --clear-groups devicectl token --scopes User.Read >/dev/null 2>&1; [ \$? = 49 ]" || true
check "logging out of the session signs the worker out of every app" \
  bash -c "nsenter -t $pid1 -a setpriv --reuid=1002 --regid=1002 --clear-groups devicectl token --scopes User.Read >/dev/null 2>&1; [ \$? = 49 ]"
# (The audit events reach the journal through devicectl-audit-journal, a moment after their commit.)
last_sign_out_was() { [ "$(audit_field account.signed_out SHAREDMODE_AUDIT_REASON)" = "$1" ]; }
wait_until 120 last_sign_out_was session-end || true
check "the audit log has the session's end as the sign-out's reason" last_sign_out_was session-end
check "resetHome: logging out resets the kiosk user's home (what the session wrote is gone)" home_reset_of shift2

# --- The idle sign-out ends the session -------------------------------------------------------------------------------
check "devicectl provision (idleSignOutSeconds 30)" inside devicectl provision --policy /root/kiosk-login-idle.json >/dev/null
check "the worker signs in at login for an idle shift" sign_in_at_login shift3
check "an app in the idle shift's session gets the worker's token" start_session_app 100003
cgroup="$(session_cgroup)"
mapfile -t shift_pids < <(session_pids "$cgroup")
check "the idle shift's session runs the shell, a process ignoring SIGTERM and the app holding a token (${#shift_pids[@]} processes)" \
  session_holds 100003 "${shift_pids[@]}"
terminations_before="$(audit_count session.terminated)"
# Nothing is done until the idle sign-out comes (idleSignOutSeconds 30 after the token call, the last activity).
wait_until 300 all_gone "${shift_pids[@]}" || true
idle_gone_ms=$(now_ms)
check "the idle sign-out: every process of the session is gone, the one ignoring SIGTERM and the token holder included" \
  all_gone "${shift_pids[@]}"
wait_until 120 session_gone || true
check "the idle sign-out ends the session" session_gone
wait_until 120 last_sign_out_was idle || true
check "the audit log has the idle sign-out" last_sign_out_was idle
# From the sign-out's own time (the audit event's, ms; the host and the container share the clock).
idle_signed_out_ms="$(audit_field account.signed_out SHAREDMODE_AUDIT_TIME | python3 -c '
import datetime, sys
text = sys.stdin.read().strip()
print(round(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000) if text else "")')"
idle_end_ms=$(( idle_gone_ms - ${idle_signed_out_ms:-0} ))
check "within the grace plus a margin of the idle sign-out (${idle_end_ms} ms; grace ${kiosk_grace} s + 10 s)" \
  bash -c "[ -n '$idle_signed_out_ms' ] && [ $idle_end_ms -le $(( (kiosk_grace + 10) * 1000 )) ]"
new_termination() { [ "$(audit_count session.terminated)" -gt "$terminations_before" ]; }
idle_correlation() { new_termination && same_correlation; }
wait_until 120 idle_correlation || true
check "the audit log has the idle sign-out and its session.terminated under one correlation id ($correlation_id)" idle_correlation
stop_session_app

# --- A one-time code at login (native authentication, against the tenant's stand-in) -----------------------------
# deviced reaches the stand-in as its https_proxy (a drop-in of the unit) and trusts its CA (the container's
# bundle); the module asks for the code the tenant sent instead of a password.
if [ -s "$work/root/root/standin-ca.pem" ]; then
  inside sh -c 'cat /root/standin-ca.pem >> /etc/ssl/certs/ca-certificates.crt'
  inside systemd-run --quiet --unit=sharedmode-standin-relay socat TCP-LISTEN:4594,bind=127.0.0.1,fork,reuseaddr \
    UNIX-CONNECT:/srv/sharedmode-standin/relay.sock
  inside mkdir -p /etc/systemd/system/deviced.service.d
  inside sh -c 'printf "[Service]\nEnvironment=https_proxy=http://127.0.0.1:4594\n" > /etc/systemd/system/deviced.service.d/standin.conf'
  inside systemctl daemon-reload
  inside systemctl stop deviced.service
  check "devicectl provision (native authentication: flows nativeAuth at the stand-in's tenant)" \
    inside devicectl provision --policy /root/kiosk-login-native.json >/dev/null
  check "a worker signs in through login with the one-time code the tenant sent (no password asked)" \
    sign_in_at_login shift4 ana@contoso.com 90417365 "One-time code: "
  code_login_ms="$kiosk_enter_ms"
  check "logind has the kiosk user's session after the one-time code" session_is_kiosk_users
  signed_in_by_code() { audit_field account.signed_in SHAREDMODE_AUDIT_DETAILS | grep -q nativeAuth; }
  wait_until 120 signed_in_by_code || true
  check "the audit log has the sign-in by native authentication" signed_in_by_code
  check "no one-time code, and no password of the shifts before, in the journal" \
    bash -c "! nsenter -t $pid1 -a journalctl --no-pager -q -o export | grep -q '90417365\|$kiosk_password'"
  check "an app outside the session gets the code-signed worker's token" as_app 1002 devicectl token --scopes User.Read >/dev/null
  check "root's sign-out ends the one-time code's session" inside devicectl signout --reason shift-end >/dev/null
  wait_until 120 session_gone || true
  check "logind no longer has it" session_gone
  inside rm -f /etc/systemd/system/deviced.service.d/standin.conf
  inside systemctl daemon-reload
  inside systemctl stop sharedmode-standin-relay.service
else
  echo "systemtest: the one-time code at login is skipped: the native-auth stand-in did not start" >&2
fi

# Back to where the next section starts: the package purged with its state.
inside mkdir -p /etc/sharedmode
inside touch /etc/sharedmode/purge-state
inside env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q sharedmode >>"$work/install.log" 2>&1
