#!/usr/bin/env python3
"""Local TLS stand-in for login.microsoftonline.com, for the MSAL Python tests (standard library only).

MSAL Python makes exactly two HTTP requests on the way to the broker, and fails without answers:
  GET /<tenant>/v2.0/.well-known/openid-configuration     (PublicClientApplication(...); any tenant segment)
  GET /common/discovery/instance?api-version=1.1&...       (the first get_accounts())
This server answers those two with realistic bodies and everything else (any other path, any POST) with 404,
and logs every request to stderr ("DISCOVERY GET /path -> status").

Usage: discovery_server.py CERT KEY [--host 127.0.0.1] [--port 443] [--ready-file PATH]
  CERT/KEY: PEM server certificate (for login.microsoftonline.com) and its key.
  --ready-file: written (containing the pid) once the socket listens.
Run as root for port 443, inside a network namespace where /etc/hosts maps the login hosts to 127.0.0.1.
"""
import argparse
import http.server
import json
import os
import re
import signal
import ssl
import sys

HOST = "https://login.microsoftonline.com"
GENERIC_TENANTS = ("organizations", "common", "consumers")
OPENID = re.compile(r"^/([^/?]+)/v2\.0/\.well-known/openid-configuration(\?.*)?$")
INSTANCE = re.compile(r"^/common/discovery/instance(\?.*)?$")


def openid_configuration(tenant):
    issuer = f"{HOST}/{{tenantid}}/v2.0" if tenant in GENERIC_TENANTS else f"{HOST}/{tenant}/v2.0"
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{HOST}/{tenant}/oauth2/v2.0/authorize",
        "token_endpoint": f"{HOST}/{tenant}/oauth2/v2.0/token",
        "device_authorization_endpoint": f"{HOST}/{tenant}/oauth2/v2.0/devicecode",
        "end_session_endpoint": f"{HOST}/{tenant}/oauth2/v2.0/logout",
        "jwks_uri": f"{HOST}/{tenant}/discovery/v2.0/keys",
        "response_modes_supported": ["query", "fragment", "form_post"],
        "tenant_region_scope": None,
        "cloud_instance_name": "microsoftonline.com",
    }


def instance_discovery():
    return {
        "tenant_discovery_endpoint": f"{HOST}/common/v2.0/.well-known/openid-configuration",
        "api-version": "1.1",
        "metadata": [{
            "preferred_network": "login.microsoftonline.com",
            "preferred_cache": "login.windows.net",
            "aliases": ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"],
        }],
    }


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _log(self, status):
        sys.stderr.write(f"DISCOVERY {self.command} {self.path} -> {status}\n")
        sys.stderr.flush()

    def _send(self, status, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self._log(status)

    def do_GET(self):
        m = OPENID.match(self.path)
        if m:
            return self._send(200, openid_configuration(m.group(1)))
        if INSTANCE.match(self.path):
            return self._send(200, instance_discovery())
        self._send(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._send(404)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser(description="TLS discovery stand-in for login.microsoftonline.com")
    ap.add_argument("cert")
    ap.add_argument("key")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=443)
    ap.add_argument("--ready-file")
    args = ap.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    http.server.ThreadingHTTPServer.daemon_threads = True
    srv = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    # Handshake in the connection's thread (on first read), so one stalled client cannot block accept().
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, args.ready_file)
    sys.stderr.write(f"DISCOVERY listening on https://{args.host}:{args.port}\n")
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
