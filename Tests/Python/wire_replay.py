#!/usr/bin/env python3
"""Replays one connection's messages of broker-api.md against the broker, as whoever runs it (the tests
run it under an app's uid), and prints every reply exactly as it came, one JSON object per line, flushed:
{"reply": "<the reply's text>"}; {"closed": true} when the broker closed the connection first.

Usage: wire_replay.py SOCKET SCRIPT
  SCRIPT is JSON: {"hold": N, "messages": [{"send": TEXT or null, "replies": K}, ...]}. N connections are
  opened and kept first (they send nothing); then on one more connection each TEXT is sent with its NUL
  (null: nothing is sent, the replies come unasked), and K replies are read, fewer when one ends the call
  (it has no "continues") or the broker closes the connection. The broker's replies are waited for as
  long as they take: the test that runs this ends it when it gives up.
"""
import json
import socket
import sys


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def main():
    path, script = sys.argv[1], json.loads(sys.argv[2])
    held = [connect(path) for _ in range(script.get("hold", 0))]
    sock = connect(path)
    buffered = b""
    for message in script["messages"]:
        if message["send"] is not None:
            try:
                sock.sendall(message["send"].encode() + b"\0")
            except (BrokenPipeError, ConnectionResetError):
                emit(closed=True)
                return
        for _ in range(message["replies"]):
            while b"\0" not in buffered:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    emit(closed=True)
                    return
                buffered += chunk
            reply, buffered = buffered.split(b"\0", 1)
            text = reply.decode()
            emit(reply=text)
            if not json.loads(text).get("continues", False):
                break
    emit(done=True)
    for connection in held:
        connection.close()
    sock.close()


if __name__ == "__main__":
    main()
