#!/usr/bin/python3
"""act_for_caller.py SOCKET HANDOVER [ARG] [CALL...]

A host process that asks deviced to act for another process on its connection, as the MSAL bridge does
(ActForCaller), then makes CALLs (varlink messages as JSON text) on that connection; prints each reply as a
JSON line. What it hands over (HANDOVER):

  pid PID     a pidfd of process PID (pidfd_open), held until the end
  file PATH   a descriptor of the file PATH (not a pidfd)
  exited      a pidfd of a child that has exited and been reaped
  number N    the number N, no descriptor behind it

A CALL `wait` prints `waiting` and keeps the connection open until a line comes on standard input.

Raw sockets and the standard library only (os.pidfd_open, Python 3.9), so it runs as any uid.
"""
import json
import os
import socket
import sys


def handover(kind, argument):
    if kind == "pid":
        return os.pidfd_open(int(argument))
    if kind == "file":
        return os.open(argument, os.O_RDONLY | os.O_CLOEXEC)
    if kind == "exited":
        child = os.fork()
        if child == 0:
            os._exit(0)
        descriptor = os.pidfd_open(child)
        os.waitpid(child, 0)
        return descriptor
    if kind == "number":
        return int(argument)
    raise SystemExit(f"act_for_caller.py: unknown handover {kind}")


def exchange(connection, buffer, message):
    connection.sendall(message.encode() + b"\0")
    while b"\0" not in buffer:
        chunk = connection.recv(65536)
        if not chunk:
            raise SystemExit("act_for_caller.py: deviced closed the connection")
        buffer += chunk
    reply, _, rest = buffer.partition(b"\0")
    print(reply.decode(), flush=True)
    return rest


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    path, kind = sys.argv[1], sys.argv[2]
    takes_argument = kind in ("pid", "file", "number")
    argument = sys.argv[3] if takes_argument else None
    calls = sys.argv[4:] if takes_argument else sys.argv[3:]
    descriptor = handover(kind, argument)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    act = {"method": "org.sharedmode.Broker1.ActForCaller", "parameters": {"callerPidfd": descriptor}}
    buffer = exchange(connection, b"", json.dumps(act))
    for call in calls:
        if call == "wait":
            print("waiting", flush=True)
            sys.stdin.readline()
            continue
        buffer = exchange(connection, buffer, call)
    connection.close()


if __name__ == "__main__":
    main()
