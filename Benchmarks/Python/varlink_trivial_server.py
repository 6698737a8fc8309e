"""The floor under a Python app's silent token through deviced: a trivial org.sharedmode.Broker1 server in
PyPI varlink (its ThreadingServer), whose AcquireTokenSilent answers a fixed result of the size deviced's
has (a JWT-sized access token, the account), with no store, policy or crypto. tools/bench broker times
varlink_silent.py against it and against deviced in the same run.

    python3 varlink_trivial_server.py INTERFACE_DIR SOCKET

INTERFACE_DIR holds org.sharedmode.Broker1.varlink. Serves until killed.
"""
import os
import sys

import varlink

interface_dir, socket = sys.argv[1], sys.argv[2]
service = varlink.Service(
    vendor="sharedmode",
    product="trivial broker (benchmark floor)",
    version="1",
    url="about:blank",
    interface_dir=interface_dir,
)

RESULT = {
    "accessToken": "e" * 1100,
    "expiresOn": 1_900_000_000,
    "scopes": ["User.Read"],
    "source": "cache",
    "account": {
        "homeAccountId": "00000000-0000-0000-0000-000000000001.00000000-0000-0000-0000-0000000000aa",
        "environment": "login.microsoftonline.com",
        "realm": "00000000-0000-0000-0000-0000000000aa",
        "username": "worker1@contoso.example",
        "name": "Worker One",
        "localAccountId": "00000000-0000-0000-0000-000000000001",
    },
    "correlationId": "00000000-0000-0000-0000-00000000c0de",
}


@service.interface("org.sharedmode.Broker1")
class Broker:
    def AcquireTokenSilent(self, scopes, forceRefresh=None, msalClientId=None, authority=None):
        return {"result": RESULT}


class Handler(varlink.RequestHandler):
    service = service


if os.path.exists(socket):
    os.unlink(socket)
server = varlink.ThreadingServer("unix:" + socket, Handler)
os.chmod(socket, 0o666)
server.serve_forever()
