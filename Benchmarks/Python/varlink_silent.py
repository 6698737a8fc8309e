"""AcquireTokenSilent through org.sharedmode.Broker1 directly (PyPI varlink, one connection), as a Python app
that speaks the broker's own protocol would: tools/bench-msal's baseline beside MSAL Python through the MSAL
bridge. Prints {"p50_ms":…,"p90_ms":…,"count":N} on one line.

    python3 varlink_silent.py SOCKET COUNT
"""
import json
import sys
import time

import varlink

socket, count = sys.argv[1], int(sys.argv[2])
with varlink.Client(address="unix:" + socket) as client, client.open("org.sharedmode.Broker1") as broker:
    for _ in range(20):
        broker.AcquireTokenSilent(scopes=["User.Read"])
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        broker.AcquireTokenSilent(scopes=["User.Read"])
        samples.append((time.perf_counter() - start) * 1000)
samples.sort()
print(json.dumps({"count": count, "p50_ms": round(samples[len(samples) // 2], 3), "p90_ms": round(samples[int(len(samples) * 0.9)], 3)}))
