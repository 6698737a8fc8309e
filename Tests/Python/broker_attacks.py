#!/usr/bin/env python3
"""A hostile local app (or user) attacking the broker over raw varlink frames, as the broker attack tests
run it under another Unix uid. Every mode prints one JSON object per line on standard output, flushed,
for the Swift test to read. Each loop is bounded in count and time; it talks only to the socket given.

Modes:
  pipeline SOCKET CONNECTIONS CALLS BYTES
      CONNECTIONS connections, each a SubscribeAccountChanges (never ending) followed by CALLS pipelined
      calls of about BYTES bytes each; prints "sent", then holds the connections until SIGTERM. Prints per
      connection the error that ended it (or none) and whether the broker closed it.
  held SOCKET CONNECTIONS BYTES SHAPE
      CONNECTIONS connections, each a SubscribeAccountChanges (never ending) and one call of about BYTES
      bytes behind it: SHAPE `values` is a parameter `[{"":0},…]` (the most values per byte), `string` one
      long string. Prints `sent` once the broker has read every byte sent (or closed the connection), then
      holds the connections until SIGTERM, and prints per connection the error that ended it (or none)
      and whether the broker closed it.
  unread SOCKET CONNECTIONS CALLS SERVICE ACCOUNT HOLD
      CONNECTIONS connections, each pipelining CALLS FindGenericPassword for one (large) item and never
      reading; once the broker has closed them all (or after HOLD seconds), prints how many it closed.
  unread-held SOCKET CONNECTIONS CALLS SERVICE ACCOUNT
      As unread, but prints `stalled` once every connection has a reply waiting (or was closed), then holds
      them until SIGTERM and prints how many the broker closed.
  flood-connections SOCKET COUNT HOLD
      Opens up to COUNT connections and keeps them HOLD seconds (one byte of a message every second on
      each, as a trickling attacker would); prints how many were admitted and the refusals' errors.
  trickle SOCKET SECONDS
      One connection sending one byte of a message every second; prints when the broker closed it.
  refusals SOCKET COUNT METHOD PARAMETERS_JSON
      COUNT calls of METHOD on one connection, pipelined in batches; prints how many errors came back.
  add SOCKET COUNT BYTES PREFIX
      Adds COUNT items of a BYTES-byte secret (service PREFIX-i) to the caller's first group; prints the
      last error, if any.
  call SOCKET METHOD PARAMETERS_JSON
      One call; prints its reply (error and parameters).
  fake-broker SOCKET
      Listens on SOCKET as whoever runs it (a fake broker) until SIGTERM: accepts connections, answers any
      message with a made-up success, and then prints how many bytes clients sent it.
  browser-flood SOCKET COUNT
      COUNT connections, each starting a SignInWithBrowser (loopback redirect, left pending); reads each
      one's first reply and prints how many were started (an authorization URL came back) and the limits
      that refused the others; then holds the connections (the sign-ins pending) until SIGTERM.
  find-all SOCKET LABEL
      FindGenericPassword with all over the items labelled LABEL; prints the reply's error or item count.
"""
import base64
import fcntl
import json
import select
import signal
import socket
import struct
import sys
import termios
import time

INTERFACE = "org.sharedmode.Broker1"


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def connect(path, timeout=10):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    return sock


def frame(method, parameters=None, more=False):
    message = {"method": INTERFACE + "." + method}
    if parameters is not None:
        message["parameters"] = parameters
    if more:
        message["more"] = True
    return json.dumps(message).encode() + b"\0"


def read_replies(sock, deadline):
    """Every reply until the broker closes the connection or the deadline passes (None: only what has arrived,
    without waiting): (replies, closed)."""
    data = b""
    closed = False
    while deadline is None or time.time() < deadline:
        try:
            sock.settimeout(0 if deadline is None else max(0.05, deadline - time.time()))
            chunk = sock.recv(1 << 20)
        except (socket.timeout, BlockingIOError):
            break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    # The last part may be a reply cut short by the close.
    return [json.loads(part) for part in data.split(b"\0")[:-1] if part], closed


def send_all(sock, payload):
    try:
        sock.sendall(payload)
        return True
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        return False


def pipeline(path, connections, calls, size):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    padding = "x" * size
    call = frame("GetDeviceInformation", {"padding": padding})
    socks = []
    for _ in range(connections):
        sock = connect(path)
        send_all(sock, frame("SubscribeAccountChanges", more=True))
        socks.append(sock)
    for sock in socks:
        # The attacker never gives up inside a message (a loaded daemon may take a while to read one): only
        # the daemon ends a connection.
        sock.settimeout(120)
        for _ in range(calls):
            if not send_all(sock, call):
                break
    emit(step="sent", connections=len(socks))
    # Holds every connection until the test is done with the daemon (SIGTERM), however long that takes.
    signal.sigwait({signal.SIGTERM})
    for index, sock in enumerate(socks):
        replies, closed = read_replies(sock, time.time() + (30 if index == 0 else 0.5))
        errors = [reply for reply in replies if reply.get("error")]
        emit(step="connection", index=index, replies=len(replies), closed=closed,
             error=errors[-1]["error"] if errors else None,
             reason=(errors[-1].get("parameters") or {}).get("reason") if errors else None)
    for sock in socks:
        sock.close()


def unsent(sock):
    """The bytes sent on sock that the peer has not read yet (SIOCOUTQ); 0 once the peer closed."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0)))[0]
    except OSError:
        return 0


def peer_closed(sock):
    """Whether the broker has closed its end of sock (replies it wrote before may still be unread)."""
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP)
    return any(events & (select.POLLRDHUP | select.POLLHUP) for _, events in poller.poll(0))


def drain(sock):
    """The replies the broker sent so far, without waiting for more: (replies, closed)."""
    return read_replies(sock, None)


def held(path, connections, size, shape):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    padding = [{"": 0}] * (size // 7) if shape == "values" else "x" * size
    call = json.dumps({"method": INTERFACE + ".GetDeviceInformation", "parameters": {"padding": padding}},
                      separators=(",", ":")).encode() + b"\0"
    socks = []
    for _ in range(connections):
        sock = connect(path, timeout=120)
        if send_all(sock, frame("SubscribeAccountChanges", more=True)):
            send_all(sock, call)
        socks.append(sock)
    # Until the broker has read every byte (the kernel's count of what it has not read yet), however loaded.
    deadline = time.time() + 120
    while time.time() < deadline and any(unsent(sock) > 0 for sock in socks):
        time.sleep(0.02)
    emit(step="sent", connections=len(socks), unread=sum(unsent(sock) for sock in socks))
    signal.sigwait({signal.SIGTERM})
    for index, sock in enumerate(socks):
        replies, closed = drain(sock)
        errors = [reply for reply in replies if reply.get("error")]
        emit(step="connection", index=index, closed=closed,
             error=errors[-1]["error"] if errors else None,
             reason=(errors[-1].get("parameters") or {}).get("reason") if errors else None)
        sock.close()


def browser_flood(path, count):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    parameters = {"scopes": ["User.Read"], "redirectUri": "http://127.0.0.1/", "timeout": 3600}
    socks, started, refused = [], 0, []
    for _ in range(count):
        sock = connect(path, timeout=120)
        send_all(sock, frame("SignInWithBrowser", parameters, more=True))
        replies, _ = read_replies_until_one(sock)
        first = replies[0] if replies else {}
        if (first.get("parameters") or {}).get("authorizationUrl"):
            started += 1
        else:
            refused.append(first.get("error", "closed") + ":" + str((first.get("parameters") or {}).get("limit")))
        socks.append(sock)
    emit(step="flooded", started=started, refused=refused)
    signal.sigwait({signal.SIGTERM})
    for sock in socks:
        sock.close()


def unread(path, connections, calls, service, account, hold):
    call = frame("FindGenericPassword", {"service": service, "account": account})
    socks = []
    for _ in range(connections):
        sock = connect(path)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        for _ in range(calls):
            if not send_all(sock, call):
                break
        socks.append(sock)
    emit(step="sent", connections=len(socks))
    # Until the broker has closed every connection (it closes those that never read), or `hold` seconds.
    deadline = time.time() + hold
    while time.time() < deadline and not all(peer_closed(sock) for sock in socks):
        time.sleep(0.05)
    closed = 0
    for sock in socks:
        # A closed connection still holds what was written before the close; read until the end.
        _, was_closed = read_replies(sock, time.time() + 5)
        closed += 1 if was_closed else 0
        sock.close()
    emit(step="unread", closed=closed)


def unread_held(path, connections, calls, service, account):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    call = frame("FindGenericPassword", {"service": service, "account": account})
    socks = []
    for _ in range(connections):
        sock = connect(path, timeout=120)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for _ in range(calls):
            if not send_all(sock, call):
                break
        socks.append(sock)

    def waiting(sock, timeout_ms):
        """Whether a reply has arrived on sock (or the broker closed it) within timeout_ms."""
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLRDHUP)
        return bool(poller.poll(timeout_ms))

    def closed(sock):
        poller = select.poll()
        poller.register(sock, select.POLLRDHUP)
        return any(events & (select.POLLRDHUP | select.POLLHUP) for _, events in poller.poll(0))

    # Until the broker has answered (or closed) every connection, however loaded: it runs a connection's next
    # call only once the replies before are read, so nothing more comes.
    deadline = time.time() + 120
    pending = list(socks)
    while pending and time.time() < deadline:
        pending = [sock for sock in pending if not waiting(sock, 50)]
    emit(step="stalled", connections=len(socks), pending=len(pending), closed=sum(closed(sock) for sock in socks))
    signal.sigwait({signal.SIGTERM})
    emit(step="unread", closed=sum(closed(sock) for sock in socks))
    for sock in socks:
        sock.close()


def flood_connections(path, count, hold):
    admitted, refused, errors = [], 0, {}
    for _ in range(count):
        try:
            sock = connect(path, timeout=2)
        except OSError as error:
            refused += 1
            errors[str(error)] = errors.get(str(error), 0) + 1
            continue
        sock.settimeout(0.2)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            data = None
        except ConnectionResetError:
            data = b""
        if data is None:
            admitted.append(sock)
            continue
        reply = json.loads(data.split(b"\0")[0]) if b"\0" in data else {}
        name = "%s/%s" % (reply.get("error"), (reply.get("parameters") or {}).get("scope"))
        errors[name] = errors.get(name, 0) + 1
        refused += 1
        sock.close()
    emit(step="flooded", admitted=len(admitted), refused=refused, errors=errors)
    message = frame("GetCaller")
    deadline = time.time() + hold
    position = 0
    while time.time() < deadline and position < len(message) - 1:
        for sock in admitted:
            send_all(sock, message[position:position + 1])
        position += 1
        time.sleep(1)
    still_open = 0
    for sock in admitted:
        replies, closed = read_replies(sock, time.time() + 0.2)
        still_open += 0 if closed else 1
        sock.close()
    emit(step="released", stillOpen=still_open)


def trickle(path, seconds):
    sock = connect(path)
    message = frame("GetCaller")
    started = time.time()
    closed_after = None
    replies = []
    for position in range(min(seconds, len(message) - 1)):
        if not send_all(sock, message[position:position + 1]):
            closed_after = time.time() - started
            break
        received, closed = read_replies(sock, time.time() + 1)
        replies += received
        if closed:
            closed_after = time.time() - started
            break
    errors = [reply for reply in replies if reply.get("error")]
    emit(step="trickle", closedAfter=closed_after, error=errors[-1]["error"] if errors else None,
         reason=(errors[-1].get("parameters") or {}).get("reason") if errors else None)
    sock.close()


def refusals(path, count, method, parameters):
    sock = connect(path, timeout=30)
    errors, answered = {}, 0
    batch = 50
    for start in range(0, count, batch):
        size = min(batch, count - start)
        send_all(sock, frame(method, parameters) * size)
        data = b""
        while data.count(b"\0") < size:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        for part in data.split(b"\0"):
            if part:
                answered += 1
                name = json.loads(part).get("error")
                errors[name] = errors.get(name, 0) + 1
    emit(step="refusals", answered=answered, errors=errors)
    sock.close()


def add(path, count, size, prefix):
    sock = connect(path, timeout=30)
    secret = base64.b64encode(b"s" * size).decode()
    last_error, added = None, 0
    for index in range(count):
        send_all(sock, frame("AddGenericPassword", {"service": "%s-%d" % (prefix, index), "account": "attacker",
                                                    "secret": secret, "label": prefix}))
        replies, closed = read_replies_until_one(sock)
        if not replies:
            last_error = "closed"
            break
        if replies[0].get("error"):
            last_error = replies[0]
            break
        added += 1
    emit(step="add", added=added, error=last_error)
    sock.close()


def read_replies_until_one(sock):
    data = b""
    while b"\0" not in data:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return [], True
        data += chunk
    return [json.loads(data.split(b"\0")[0])], False


def find_all(path, label):
    sock = connect(path, timeout=60)
    send_all(sock, frame("FindGenericPassword", {"label": label, "all": True}))
    replies, _ = read_replies_until_one(sock)
    reply = replies[0] if replies else {}
    emit(step="find-all", error=reply.get("error"), parameters=reply.get("parameters") if reply.get("error") else None,
         items=len((reply.get("parameters") or {}).get("items") or []))
    sock.close()


def call(path, method, parameters):
    sock = connect(path, timeout=30)
    send_all(sock, frame(method, parameters))
    replies, _ = read_replies_until_one(sock)
    reply = replies[0] if replies else {}
    emit(step="call", method=method, error=reply.get("error"), parameters=reply.get("parameters"))
    sock.close()


def fake_broker(path):
    import os
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
    server.listen(16)
    server.settimeout(0.2)
    emit(step="listening")
    received = 0
    while not stopping:
        try:
            client, _ = server.accept()
        except (socket.timeout, InterruptedError):
            continue
        client.settimeout(0.2)
        try:
            while not stopping:
                try:
                    data = client.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                received += len(data)
                for _ in range(data.count(b"\0")):
                    client.sendall(json.dumps({"parameters": {"uid": 0, "appId": None, "accessGroups": [], "administrator": True,
                                                              "account": None, "global": True, "itemsRemoved": 99}}).encode() + b"\0")
        except (ConnectionResetError, BrokenPipeError):
            pass
        client.close()
    emit(step="fake-broker", received=received)
    server.close()


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    arguments = sys.argv[3:]
    if mode == "pipeline":
        pipeline(path, int(arguments[0]), int(arguments[1]), int(arguments[2]))
    elif mode == "held":
        held(path, int(arguments[0]), int(arguments[1]), arguments[2])
    elif mode == "unread":
        unread(path, int(arguments[0]), int(arguments[1]), arguments[2], arguments[3], float(arguments[4]))
    elif mode == "unread-held":
        unread_held(path, int(arguments[0]), int(arguments[1]), arguments[2], arguments[3])
    elif mode == "flood-connections":
        flood_connections(path, int(arguments[0]), float(arguments[1]))
    elif mode == "trickle":
        trickle(path, int(arguments[0]))
    elif mode == "refusals":
        refusals(path, int(arguments[0]), arguments[1], json.loads(arguments[2]))
    elif mode == "add":
        add(path, int(arguments[0]), int(arguments[1]), arguments[2])
    elif mode == "call":
        call(path, arguments[0], json.loads(arguments[1]))
    elif mode == "fake-broker":
        fake_broker(path)
    elif mode == "browser-flood":
        browser_flood(path, int(arguments[0]))
    elif mode == "find-all":
        find_all(path, arguments[0])
    else:
        sys.exit("unknown mode " + mode)
