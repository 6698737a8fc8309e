#!/usr/bin/env python3
"""Replays one connection's messages of broker-api.md against the broker, as whoever runs it (the tests
run it under an app's uid), and prints every reply exactly as it came, one JSON object per line, flushed:
{"reply": "<the reply's text>"}; {"closed": true} when the broker closed the connection first.

Usage: wire_replay.py SOCKET SCRIPT
  SCRIPT is a file of JSON: {"hold": N, "messages": [{"send": TEXT or null, "replies": K}, ...]}. N connections are
  opened and kept first, one after the other, each admitted before the next is opened (it answered a GetInfo:
  the broker admits connections asynchronously, so without that a later one could take an earlier one's slot);
  then on one more connection each TEXT is sent with its NUL
  (null: nothing is sent, the replies come unasked), and K replies are read, fewer when one ends the call
  (it has no "continues") or the broker closes the connection. A message's "signInId" the page shortened
  with "…" is sent as the broker gave it in an earlier reply. The broker's replies are waited for as
  long as they take: the test that runs this ends it when it gives up.
"""
import json
import re
import socket
import sys


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def read_reply(sock, buffered):
    """The next reply's text and what is left, or (None, b"") when the broker closed the connection."""
    while b"\0" not in buffered:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None, b""
        buffered += chunk
    reply, buffered = buffered.split(b"\0", 1)
    return reply.decode(), buffered


# Fields whose value the broker chose in an earlier reply and a later message of the page must send back
# (the page shows them shortened, with "…"): the value last seen in a reply is sent instead.
ECHOED_FIELDS = ("signInId",)


def echo_earlier_values(message, seen):
    for field in ECHOED_FIELDS:
        if field in seen:
            message = re.sub(r'"%s":"[^"]*…[^"]*"' % field, lambda _: '"%s":%s' % (field, json.dumps(seen[field])), message)
    return message


def remember_values(value, seen):
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ECHOED_FIELDS and isinstance(item, str):
                seen[key] = item
            remember_values(item, seen)
    elif isinstance(value, list):
        for item in value:
            remember_values(item, seen)


def main():
    path = sys.argv[1]
    with open(sys.argv[2], encoding="utf-8") as file:
        script = json.load(file)
    held = []
    for _ in range(script.get("hold", 0)):
        connection = connect(path)
        connection.sendall(b'{"method":"org.varlink.service.GetInfo"}\0')
        reply, _ = read_reply(connection, b"")
        if reply is None or "error" in json.loads(reply):
            emit(held_refused=reply)
            return
        held.append(connection)
    sock = connect(path)
    buffered = b""
    seen = {}
    for message in script["messages"]:
        if message["send"] is not None:
            try:
                sock.sendall(echo_earlier_values(message["send"], seen).encode() + b"\0")
            except (BrokenPipeError, ConnectionResetError):
                # The broker refused while the message was arriving: its reply may be waiting to be read.
                pass
        for _ in range(message["replies"]):
            text, buffered = read_reply(sock, buffered)
            if text is None:
                emit(closed=True)
                return
            emit(reply=text)
            remember_values(json.loads(text), seen)
            if not json.loads(text).get("continues", False):
                break
    emit(done=True)
    for connection in held:
        connection.close()
    sock.close()


if __name__ == "__main__":
    main()
