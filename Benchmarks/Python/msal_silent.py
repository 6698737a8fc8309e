"""MSAL Python's acquire_token_silent on an in-memory cache, as the token benchmark's baseline.

Usage: msal_silent.py ISSUER CLIENT_ID N
Prints `msal-silent p50 X p99 Y` (microseconds) for N silent calls that MSAL answers from its cache.

Offline: an HTTP stub answers OpenID discovery and one token request (a username/password grant that
fills the cache with an access token for User.Read, a refresh token and an ID token), so every timed
call is MSAL's own cache lookup, as the Swift side's is.
"""
import base64
import json
import sys
import time

import msal


def b64url(data):
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()


class Response:
    def __init__(self, body, status=200):
        self.status_code = status
        self.text = json.dumps(body)
        self.headers = {"Content-Type": "application/json"}

    def raise_for_status(self):
        if self.status_code >= 400:
            raise RuntimeError("HTTP %d" % self.status_code)


class OfflineHTTP:
    """Answers the requests MSAL makes; counts them so the timed calls can be shown to be offline."""

    def __init__(self, issuer, client_id):
        self.issuer, self.client_id, self.requests = issuer, client_id, 0

    def get(self, url, params=None, headers=None, **kwargs):
        self.requests += 1
        if url.endswith("/.well-known/openid-configuration"):
            return Response({
                "issuer": self.issuer,
                "authorization_endpoint": self.issuer + "/auth",
                "token_endpoint": self.issuer + "/token",
                "device_authorization_endpoint": self.issuer + "/device_authorization",
                "end_session_endpoint": self.issuer + "/end_session",
            })
        return Response({"error": "not_found"}, 404)

    def post(self, url, params=None, data=None, headers=None, **kwargs):
        self.requests += 1
        now = int(time.time())
        id_token = b64url({"alg": "none", "typ": "JWT"}) + "." + b64url({
            "iss": self.issuer, "aud": self.client_id, "sub": "bench", "oid": "bench", "tid": "contoso",
            "preferred_username": "bench.worker@contoso.com", "name": "Bench Worker", "iat": now, "exp": now + 86400,
        }) + "."
        return Response({
            "access_token": "at-bench", "refresh_token": "rt-bench", "id_token": id_token, "token_type": "Bearer",
            "expires_in": 86400, "ext_expires_in": 86400, "scope": "openid profile offline_access User.Read",
            "client_info": b64url({"uid": "bench", "utid": "contoso"}),
        })

    def close(self):
        pass


def main():
    issuer, client_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    http = OfflineHTTP(issuer, client_id)
    app = msal.PublicClientApplication(client_id, oidc_authority=issuer, http_client=http)
    result = app.acquire_token_by_username_password("bench.worker@contoso.com", "password", scopes=["User.Read"])
    if "access_token" not in result:
        sys.exit("msal_silent: the cache was not filled: %s" % result)
    account = app.get_accounts()[0]
    before = http.requests
    for _ in range(min(200, count)):  # warm up
        app.acquire_token_silent(["User.Read"], account=account)
    samples = []
    for _ in range(count):
        start = time.perf_counter_ns()
        token = app.acquire_token_silent(["User.Read"], account=account)
        samples.append(time.perf_counter_ns() - start)
        if token is None or token.get("token_source") not in (None, "cache"):
            sys.exit("msal_silent: a silent call did not come from the cache: %s" % token)
    if http.requests != before:
        sys.exit("msal_silent: silent calls went to the network (%d requests)" % (http.requests - before))
    samples.sort()
    print("msal-silent p50 %.1f p99 %.1f" % (samples[len(samples) // 2] / 1000, samples[int(len(samples) * 0.99)] / 1000))


if __name__ == "__main__":
    main()
