#!/usr/bin/env python3
"""An independent varlink client (PyPI `varlink`, plus raw sockets) that the broker tests run as other
Unix users. Every mode prints one JSON object per line on standard output, flushed, for the Swift test
to read; it never prints a token or secret it was not asked to check.

Modes:
  conformance SOCKET            introspection, a real call, error replies
  subscribe SOCKET COUNT        a `more` subscription: prints the first COUNT events, then exits
  bad-inputs SOCKET             malformed bytes on raw connections; after each, a fresh call still works
  limits SOCKET LIMIT           LIMIT connections held open, one more refused, the held ones still served
  idle SOCKET                   a connection that sends nothing is closed by the broker
"""
import json
import socket
import sys
import time

import varlink

INTERFACE = "org.sharedmode.Broker1"


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def raw_connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    return sock


def raw_exchange(path, payload):
    """Sends payload bytes; returns (first reply or None, whether the broker then closed the connection)."""
    sock = raw_connect(path)
    try:
        sock.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    closed = False
    try:
        while b"\0" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            data += chunk
        if not closed:
            # A broker that closes does so right after its reply; one that keeps serving stays silent.
            sock.settimeout(1)
            closed = sock.recv(65536) == b""
    except (ConnectionResetError, socket.timeout):
        closed = True
    sock.close()
    reply = json.loads(data.split(b"\0")[0]) if b"\0" in data else None
    return reply, closed


def still_serving(path):
    with varlink.Client(address="unix:" + path) as client:
        with client.open(INTERFACE) as broker:
            return "uid" in broker.GetCaller()


def conformance(path):
    with varlink.Client(address="unix:" + path) as client:
        with client.open("org.varlink.service") as service:
            info = service.GetInfo()
            emit(step="GetInfo", vendor=info["vendor"], product=info["product"], interfaces=info["interfaces"])
            description = service.GetInterfaceDescription(INTERFACE)["description"]
            emit(step="GetInterfaceDescription", description=description)
            try:
                service.GetInterfaceDescription("org.example.Missing")
            except varlink.VarlinkError as error:
                emit(step="InterfaceNotFound", error=error.error(), parameters=error.parameters())
        # `client.open` parses the interface description: it must be valid varlink IDL.
        with client.open(INTERFACE) as broker:
            caller = broker.GetCaller()
            emit(step="GetCaller", **caller)
            info = broker.GetDeviceInformation()
            emit(step="GetDeviceInformation", mode=info["information"]["mode"])
            try:
                broker.FindGenericPassword(service="no-such-service", account="nobody")
            except varlink.VarlinkError as error:
                emit(step="ItemNotFound", error=error.error(), parameters=error.parameters())
            emit(step="GetAccounts", **broker.GetAccounts())
            try:
                broker.AcquireTokenSilent(scopes=["User.Read"], authority="https://attacker.example/tfp/t/B2C_1_x")
            except varlink.VarlinkError as error:
                emit(step="UnlistedAuthority", error=error.error(), parameters=error.parameters())


def subscribe(path, count):
    with varlink.Client(address="unix:" + path) as client:
        with client.open(INTERFACE) as broker:
            received = 0
            for reply in broker.SubscribeAccountChanges(_more=True):
                event = reply["event"]
                current = event.get("current") or {}
                emit(step="event", kind=event["kind"], reason=event.get("reason"), mode=event["mode"],
                     sequence=event["sequence"], current=current.get("username"),
                     secondsLeft=event.get("secondsLeft"), at=time.time())
                received += 1
                if received >= count:
                    return


def bad_inputs(path):
    cases = [
        ("oversized", b"{" + b" " * (1 << 20) + b"}"),
        ("malformed", b'{"method": \0'),
        ("not-an-object", b"[1, 2, 3]\0"),
        ("unqualified-method", b'{"method": "GetCaller"}\0'),
        ("unknown-method", json.dumps({"method": INTERFACE + ".NoSuchMethod"}).encode() + b"\0"),
        ("unknown-interface", b'{"method": "org.example.Other.Method"}\0'),
        ("wrong-parameter-type", json.dumps({"method": INTERFACE + ".AcquireTokenSilent",
                                             "parameters": {"scopes": "User.Read"}}).encode() + b"\0"),
        ("missing-more", json.dumps({"method": INTERFACE + ".SubscribeAccountChanges"}).encode() + b"\0"),
        ("invalid-base64", json.dumps({"method": INTERFACE + ".AddGenericPassword",
                                       "parameters": {"service": "s", "account": "a", "secret": "***"}}).encode() + b"\0"),
    ]
    for name, payload in cases:
        reply, closed = raw_exchange(path, payload)
        emit(step=name, error=(reply or {}).get("error"), parameters=(reply or {}).get("parameters"), closed=closed,
             serving=still_serving(path))
    # A peer that vanishes mid-message.
    sock = raw_connect(path)
    sock.sendall(b'{"method": "' + INTERFACE.encode() + b'.GetCal')
    sock.close()
    emit(step="vanished-mid-message", serving=still_serving(path))


def round_trip(sock):
    """Sends GetCaller on sock and reads its reply: the broker has admitted the connection."""
    sock.sendall(json.dumps({"method": INTERFACE + ".GetCaller"}).encode() + b"\0")
    data = b""
    while b"\0" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data.split(b"\0")[0])


def serving_again(path, seconds=60):
    """Whether the broker serves a new connection within `seconds` (closed connections are let go asynchronously)."""
    deadline = time.time() + seconds
    while True:
        try:
            if still_serving(path):
                return True
        except Exception:
            pass
        if time.time() > deadline:
            return False
        time.sleep(0.05)


def limits(path, limit):
    held = [raw_connect(path) for _ in range(limit)]
    # Each held connection answered once: the broker counts all of them before the next one comes.
    admitted = sum(1 for sock in held if (round_trip(sock) or {}).get("parameters"))
    emit(step="held", admitted=admitted)
    reply, closed = raw_exchange(path, json.dumps({"method": INTERFACE + ".GetCaller"}).encode() + b"\0")
    emit(step="over-limit", error=(reply or {}).get("error"), parameters=(reply or {}).get("parameters"), closed=closed)
    answered = 0
    for sock in held:
        sock.sendall(json.dumps({"method": INTERFACE + ".GetCaller"}).encode() + b"\0")
        data = b""
        while b"\0" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        if b"\0" in data and "error" not in json.loads(data.split(b"\0")[0]):
            answered += 1
    emit(step="held-served", answered=answered)
    for sock in held:
        sock.close()
    emit(step="after-release", serving=serving_again(path))


def idle(path):
    sock = raw_connect(path)
    sock.settimeout(30)
    started = time.time()
    try:
        closed = sock.recv(65536) == b""
    except ConnectionResetError:
        closed = True
    emit(step="idle", closed=closed, seconds=time.time() - started, serving=still_serving(path))


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "conformance":
        conformance(path)
    elif mode == "subscribe":
        subscribe(path, int(sys.argv[3]))
    elif mode == "bad-inputs":
        bad_inputs(path)
    elif mode == "limits":
        limits(path, int(sys.argv[3]))
    elif mode == "idle":
        idle(path)
    else:
        sys.exit("unknown mode " + mode)
