#!/usr/bin/env python3
"""A stand-in for a Microsoft Entra External ID tenant's native authentication API (V1), reached by a real
deviced through `https_proxy`: this process is the proxy, and answers every CONNECT itself over TLS with a
certificate for contoso.ciamlogin.com and login.microsoftonline.com issued by a CA of its own (DIR/ca.pem;
the test makes deviced trust it). Standard library plus `cryptography` (keys, certificates, RS256).

  native_auth_standin.py DIR TENANT

DIR/script.json: {"PATH": [ANSWER, ...]}: each request to PATH takes the next answer (the last one stays);
an ANSWER is {"status": N, "body": {...}}, and a body's "id_token" given as {"claims": {...}} is signed
here with iat, nbf and exp from now. Discovery and the signing keys of TENANT are always answered. Each
request is appended to DIR/requests.jsonl ({"path", "form"}, without any form field named password or
code). Prints "port N" once listening; runs until killed.
"""
import base64
import datetime
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

HOSTS = ["contoso.ciamlogin.com", "login.microsoftonline.com"]
MICROSOFT = "https://login.microsoftonline.com"
KID = "standin-key-1"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def certificates(directory):
    """A CA (written to DIR/ca.pem) and a server certificate for HOSTS; returns the server's PEM files."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sharedmode test native-auth CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTS[0])]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    with open(os.path.join(directory, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    certfile, keyfile = os.path.join(directory, "server.pem"), os.path.join(directory, "server.key")
    with open(certfile, "wb") as f:
        f.write(server.public_bytes(serialization.Encoding.PEM))
    with open(keyfile, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return certfile, keyfile


class StandIn:
    def __init__(self, directory, tenant):
        self.directory, self.tenant = directory, tenant
        self.lock = threading.Lock()
        with open(os.path.join(directory, "script.json")) as f:
            self.script = json.load(f)
        self.signing_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        certfile, keyfile = certificates(directory)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(certfile, keyfile)
        issuer = f"{MICROSOFT}/{tenant}/v2.0"
        numbers = self.signing_key.public_key().public_numbers()
        self.always = {
            f"/{tenant}/v2.0/.well-known/openid-configuration": {
                "issuer": issuer,
                "token_endpoint": f"{MICROSOFT}/{tenant}/oauth2/v2.0/token",
                "authorization_endpoint": f"{MICROSOFT}/{tenant}/oauth2/v2.0/authorize",
                "device_authorization_endpoint": f"{MICROSOFT}/{tenant}/oauth2/v2.0/devicecode",
                "end_session_endpoint": f"{MICROSOFT}/{tenant}/oauth2/v2.0/logout",
                "jwks_uri": f"{MICROSOFT}/{tenant}/discovery/v2.0/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "response_types_supported": ["code", "id_token"],
                "subject_types_supported": ["pairwise"],
                "scopes_supported": ["openid", "profile", "email", "offline_access"],
            },
            f"/{tenant}/discovery/v2.0/keys": {"keys": [{
                "kty": "RSA", "use": "sig", "kid": KID, "x5t": KID, "issuer": issuer,
                "n": b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                "e": b64url(numbers.e.to_bytes(3, "big")),
            }]},
        }

    def sign(self, claims):
        now = int(time.time())
        claims = dict(claims, iat=now, nbf=now, exp=now + 3600)
        header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": KID}).encode())
        payload = b64url(json.dumps(claims).encode())
        signature = self.signing_key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{b64url(signature)}"

    def answer(self, path, form):
        with self.lock:
            with open(os.path.join(self.directory, "requests.jsonl"), "a") as f:
                kept = {k: v for k, v in form.items() if k not in ("password", "code")}
                f.write(json.dumps({"path": path, "form": kept}) + "\n")
            if path in self.always:
                return 200, self.always[path]
            answers = self.script.get(path)
            if not answers:
                return 404, {"error": "not_found", "error_description": f"no answer for {path}"}
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        body = dict(answer["body"])
        if isinstance(body.get("id_token"), dict):
            body["id_token"] = self.sign(body["id_token"]["claims"])
        return answer.get("status", 200), body

    def serve_tls(self, connection):
        stream = self.tls.wrap_socket(connection, server_side=True).makefile("rwb")
        while True:
            line = stream.readline()
            if not line:
                return
            method, target, _ = line.decode().split(" ", 2)
            headers = {}
            while True:
                header = stream.readline().decode()
                if header in ("\r\n", "\n", ""):
                    break
                name, _, value = header.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = stream.read(length).decode() if length else ""
            path = urllib.parse.urlsplit(target).path
            form = dict(urllib.parse.parse_qsl(body)) if method == "POST" else {}
            status, answer = self.answer(path, form)
            data = json.dumps(answer).encode()
            stream.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            stream.flush()

    def handle(self, connection):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = connection.recv(1)
                if not chunk:
                    return
                head += chunk
            if not head.startswith(b"CONNECT "):
                return
            connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.serve_tls(connection)
        except (OSError, ValueError, ssl.SSLError):
            pass
        finally:
            connection.close()


def main():
    directory, tenant = sys.argv[1:3]
    standin = StandIn(directory, tenant)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"port {listener.getsockname()[1]}", flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=standin.handle, args=(connection,), daemon=True).start()


if __name__ == "__main__":
    main()
