#!/usr/bin/env bash
# Real Flatpak apps for the tests that tell apps of one user apart (issue 35), built offline and cached.
#
# fixture.bash ensure
#     Builds (once) and installs system-wide (once): the runtime org.sharedmode.TestPlatform//1 (busybox),
#     and the apps com.contoso.Scanner and com.contoso.Timeclock, whose command is the static varlink-call
#     (Tests/Flatpak/varlink-call.c); each app also carries a D-Bus client, the host's gdbus with the
#     libraries it loads (`--command=gdbus`: a real D-Bus app, which reaches the session bus through
#     flatpak's xdg-dbus-proxy). Rebuilds and reinstalls the apps when either changes. Quiet when all is in
#     place. Needs root, flatpak, bubblewrap, busybox-static, gcc and gdbus (tools/setup installs them);
#     exits 77 when one is missing.
# fixture.bash run UID APP [flatpak run options...] -- [varlink-call args...]
#     Runs `flatpak run APP` as UID (group: the passwd entry's, else UID; no supplementary groups) with a
#     HOME of its own in the cache and XDG_RUNTIME_DIR=/run/user/UID (made 0700 when missing) and no other
#     environment but DBUS_SESSION_BUS_ADDRESS when FIXTURE_SESSION_BUS names a session bus (flatpak then
#     gives the sandbox a filtered proxy of it: --talk-name=NAME among the options lets the app call NAME);
#     stdin and stdout pass through. A socket's directory is reached with
#     --filesystem=DIR among the options. The sandbox dies with this process (--die-with-parent), except
#     under varlink-call --handoff, whose child must outlive the process that connected.
# fixture.bash host UID -- [varlink-call args...]
#     Runs the same static varlink-call on the host (no sandbox) as UID.
# fixture.bash remove
#     Uninstalls the apps and the runtime, deletes the remote and the cache.
#
# The cache is /var/tmp/sharedmode-flatpak-v1 (SHAREDMODE_FLATPAK_CACHE overrides it). Nothing stays
# running after any command. See Tests/Flatpak/README.md.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

here="$(cd "$(dirname "$0")" && pwd)"
source_file="$here/varlink-call.c"
cache="${SHAREDMODE_FLATPAK_CACHE:-/var/tmp/sharedmode-flatpak-v1}"
binary="$cache/bin/varlink-call"
repo="$cache/repo"
remote=sharedmode-test
runtime=org.sharedmode.TestPlatform
runtime_branch=1
apps=(com.contoso.Scanner com.contoso.Timeclock)

fail() { echo "fixture: $1" >&2; exit "${2:-1}"; }

need_root() { [ "$(id -u)" -eq 0 ] || fail "$1 needs root" 77; }

# The installed deployment of a ref, or nothing when it is not installed.
installed_location() { flatpak --system info --show-location "$1" 2>/dev/null || true; }

ensure() {
  need_root ensure
  local tool
  for tool in flatpak bwrap gcc gdbus xdg-dbus-proxy; do
    command -v "$tool" >/dev/null || fail "ensure: $tool is missing (tools/setup installs it)" 77
  done
  # Debian's busybox (dynamic) installs /bin/busybox too; only busybox-static's runs in a runtime with no libc.
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" \
    || fail "ensure: busybox-static is missing (tools/setup installs it)" 77

  # 0755: the test users reach their HOMEs and the host varlink-call through it.
  install -d -m 0755 "$cache" "$cache/bin" "$cache/home"
  # Tests run in parallel; one ensure builds while the others wait, then find everything in place.
  exec 9>"$cache/lock"
  flock 9

  # The binary is rebuilt when the source (or how it is built) changes: its hash is the stamp.
  local cflags="-static -O2 -Wall"
  local key
  key="$( { cat "$source_file"; echo "$cflags"; } | sha256sum | cut -d' ' -f1)"
  if [ ! -x "$binary" ] || [ "$(cat "$cache/varlink-call.sha256" 2>/dev/null)" != "$key" ]; then
    echo "fixture: building varlink-call (static)" >&2
    # shellcheck disable=SC2086 # cflags is a list of flags
    gcc $cflags -o "$binary.new" "$source_file"
    chmod 0755 "$binary.new"
    mv -f "$binary.new" "$binary"
    echo "$key" > "$cache/varlink-call.sha256"
  fi

  # The runtime: busybox and its sh, nothing else (the apps run only the static varlink-call). A
  # runtime's files are its usr/; files/ stays empty.
  if [ ! -f "$repo/refs/heads/runtime/$runtime/x86_64/$runtime_branch" ]; then
    echo "fixture: exporting the runtime $runtime//$runtime_branch" >&2
    local dir="$cache/build/runtime"
    rm -rf "$dir"
    mkdir -p "$dir/usr/bin" "$dir/files"
    cp /bin/busybox "$dir/usr/bin/busybox"
    ln -s busybox "$dir/usr/bin/sh"
    printf '[Runtime]\nname=%s\nruntime=%s/x86_64/%s\nsdk=%s/x86_64/%s\n' \
      "$runtime" "$runtime" "$runtime_branch" "$runtime" "$runtime_branch" > "$dir/metadata"
    flatpak build-export --runtime "$repo" "$dir" "$runtime_branch" >/dev/null
  fi

  # The D-Bus client the apps carry: gdbus, the libraries it loads and the loader, run through a wrapper
  # that names the loader and the library path (the runtime has no libc and no ld.so.cache).
  local client="$cache/build/dbus-client" client_key
  client_key="$(sha256sum /usr/bin/gdbus | cut -d' ' -f1)"
  if [ "$(cat "$cache/dbus-client.sha256" 2>/dev/null)" != "$client_key" ]; then
    echo "fixture: collecting gdbus and its libraries" >&2
    rm -rf "$client"
    mkdir -p "$client/lib/dbus-client" "$client/bin"
    cp /usr/bin/gdbus "$client/lib/dbus-client/gdbus"
    local library
    for library in $(ldd /usr/bin/gdbus | grep -o '/[^ ]*\.so[^ ]*'); do
      cp -L "$library" "$client/lib/dbus-client/$(basename "$library")"
    done
    printf '%s\n' '#!/usr/bin/sh' \
      'exec /app/lib/dbus-client/ld-linux-x86-64.so.2 --library-path /app/lib/dbus-client /app/lib/dbus-client/gdbus "$@"' \
      > "$client/bin/gdbus"
    chmod 0755 "$client/bin/gdbus"
    echo "$client_key" > "$cache/dbus-client.sha256"
  fi

  # Always pointed at this cache's repository (an earlier cache may have been elsewhere).
  flatpak --system remote-add --if-not-exists --no-gpg-verify "$remote" "$repo"
  flatpak --system remote-modify --url="file://$repo" "$remote"

  # build-init needs the runtime (as its sdk) installed, so it goes in before the apps are built.
  if [ -z "$(installed_location "runtime/$runtime/x86_64/$runtime_branch")" ]; then
    echo "fixture: installing $runtime//$runtime_branch" >&2
    flatpak --system install -y --noninteractive "$remote" "runtime/$runtime/x86_64/$runtime_branch" >/dev/null
  fi

  # An app is up to date when its installed varlink-call and gdbus are this build's.
  local app location
  for app in "${apps[@]}"; do
    location="$(installed_location "app/$app/x86_64/master")"
    if [ -n "$location" ] && cmp -s "$location/files/bin/varlink-call" "$binary" \
      && cmp -s "$location/files/lib/dbus-client/gdbus" "$client/lib/dbus-client/gdbus"; then
      continue
    fi
    echo "fixture: building and installing $app" >&2
    local dir="$cache/build/$app"
    rm -rf "$dir"
    flatpak build-init "$dir" "$app" "$runtime" "$runtime" "$runtime_branch" >/dev/null
    install -D -m 0755 "$binary" "$dir/files/bin/varlink-call"
    cp -a "$client/bin/gdbus" "$dir/files/bin/gdbus"
    cp -a "$client/lib" "$dir/files/"
    flatpak build-finish --command=varlink-call "$dir" >/dev/null
    flatpak build-export "$repo" "$dir" master >/dev/null
    # --reinstall: a changed binary replaces the installed one (a plain install refuses an installed ref).
    flatpak --system install -y --noninteractive --reinstall "$remote" "app/$app/x86_64/master" >/dev/null
  done
}

# Checks UID, makes its HOME (in the cache) and XDG_RUNTIME_DIR, and sets uid, gid and home.
prepare_user() {
  need_root "$1"
  uid="$2"
  [[ "$uid" =~ ^[0-9]+$ ]] && [ "$uid" -gt 0 ] || fail "$1: UID must be a number other than 0: $uid" 64
  [ -x "$binary" ] || fail "$1: nothing built yet (fixture.bash ensure)" 69
  # The passwd entry's group when there is one; else the uid's number, as the tests' clients use.
  gid="$(getent passwd "$uid" | cut -d: -f4 || true)" # getent fails (2) for a uid with no entry
  gid="${gid:-$uid}"
  home="$cache/home/$uid"
  [ -d "$home" ] || install -d -m 0700 -o "$uid" -g "$gid" "$home"
  [ -d /run/user ] || install -d -m 0755 /run/user
  [ -d "/run/user/$uid" ] || install -d -m 0700 -o "$uid" -g "$gid" "/run/user/$uid"
}

# The user's command: its own uid and group, no supplementary groups, killed when the caller dies, and an
# environment of just what flatpak needs (no session bus unless FIXTURE_SESSION_BUS names one of the user's:
# the caller's would belong to another user).
as_user() {
  local bus=()
  if [ -n "${FIXTURE_SESSION_BUS:-}" ]; then bus=(DBUS_SESSION_BUS_ADDRESS="$FIXTURE_SESSION_BUS"); fi
  exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --pdeathsig KILL \
    env -i HOME="$home" XDG_RUNTIME_DIR="/run/user/$uid" PATH=/usr/bin:/bin LANG=C.UTF-8 "${bus[@]}" "$@"
}

run() {
  [ $# -ge 2 ] || fail "run: fixture.bash run UID APP [flatpak run options...] -- [varlink-call args...]" 64
  prepare_user run "$1"
  local app="$2"
  shift 2
  local options=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do options+=("$1"); shift; done
  [ $# -gt 0 ] || fail "run: the varlink-call arguments follow -- (fixture.bash --help)" 64
  shift
  # bwrap's pid 1 in the sandbox outlives the app's first process while other processes remain, unless
  # --die-with-parent: then it dies with the outer bwrap, which exits with the app's first process. So a
  # handed-off connection needs the sandbox without it; anything else dies with the caller.
  if [ "${1:-}" != "--handoff" ]; then options=(--die-with-parent "${options[@]}"); fi
  as_user flatpak run "${options[@]}" "$app" "$@"
}

host() {
  [ $# -ge 2 ] && [ "$2" = "--" ] || fail "host: fixture.bash host UID -- [varlink-call args...]" 64
  prepare_user host "$1"
  shift 2
  as_user "$binary" "$@"
}

remove() {
  need_root remove
  local app
  for app in "${apps[@]}"; do
    [ -z "$(installed_location "app/$app/x86_64/master")" ] \
      || flatpak --system uninstall -y --noninteractive "app/$app/x86_64/master" >/dev/null
  done
  [ -z "$(installed_location "runtime/$runtime/x86_64/$runtime_branch")" ] \
    || flatpak --system uninstall -y --noninteractive "runtime/$runtime/x86_64/$runtime_branch" >/dev/null
  flatpak --system remote-delete --force "$remote" 2>/dev/null || true
  rm -rf "$cache"
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  ensure) [ $# -eq 1 ] || fail "ensure takes no arguments" 64; ensure ;;
  run) shift; run "$@" ;;
  host) shift; host "$@" ;;
  remove) [ $# -eq 1 ] || fail "remove takes no arguments" 64; remove ;;
  *) echo "fixture: unknown argument: ${1:-(none)} (fixture.bash --help)" >&2; exit 64 ;;
esac
