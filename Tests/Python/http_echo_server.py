#!/usr/bin/env python3
"""A loopback HTTP server for CurlTransport's tests: prints its port, then answers

  POST/PUT/DELETE/GET /echo   201 with JSON {method, path, headers, body} and the header X-Echo-Method
  GET /slow                   never (until the server is killed: for timeouts and cancellation)

until killed."""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        if self.path == "/slow":
            threading.Event().wait()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        reply = json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Method", self.command)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PUT = do_DELETE = answer


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
