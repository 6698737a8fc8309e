"""acquireTokenSilently on com.microsoft.identity.broker1 straight over D-Bus (Debian's python3-dbus), without
MSAL and pymsalruntime: the MSAL bridge's own share of an MSAL app's silent call (D-Bus, msal-bridge, varlink,
deviced). Run as the app's user in its session (tools/bench-msal). Prints {"p50_ms":…,"p90_ms":…,"count":N}.

    python3 dbus_silent.py CLIENT_ID COUNT
"""
import json
import sys
import time
import uuid

import dbus

client_id, count = sys.argv[1], int(sys.argv[2])
broker = dbus.Interface(dbus.SessionBus().get_object("com.microsoft.identity.broker1", "/com/microsoft/identity/broker1"),
                        "com.microsoft.identity.Broker1")
request = json.dumps({"authParameters": {"clientId": client_id, "requestedScopes": ["User.Read"], "account": None,
                                         "authority": "https://login.microsoftonline.com/organizations"}})


def call():
    reply = json.loads(broker.acquireTokenSilently("0.0", str(uuid.uuid4()), request))
    if "accessToken" not in reply.get("brokerTokenResponse", {}):
        sys.exit("dbus_silent.py: no token: %s" % reply)


for _ in range(20):
    call()
samples = []
for _ in range(count):
    start = time.perf_counter()
    call()
    samples.append((time.perf_counter() - start) * 1000)
samples.sort()
print(json.dumps({"count": count, "p50_ms": round(samples[len(samples) // 2], 3), "p90_ms": round(samples[int(len(samples) * 0.9)], 3)}))
