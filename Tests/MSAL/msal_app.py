#!/usr/bin/env python3
"""A stock MSAL Python public-client app with the Linux broker on, written the way the MSAL docs show it.

Run it with the venv tools/msal-python-setup makes (msal 1.39.0 + pymsalruntime 0.20.7), as the app's uid,
inside a session made by Tests/MSAL/msal-session (a session bus where com.microsoft.identity.broker1 is
activatable, an unlocked Secret Service, and the discovery stand-in for login.microsoftonline.com):

  msal_app.py --client-id ID [--scope S]... [--authority URL] STEP [STEP-OPTIONS] [STEP [STEP-OPTIONS]]...
  (--scope defaults to https://graph.microsoft.com/User.Read, --authority to .../organizations)

Steps run in order in this one process. MSAL keeps its accounts and tokens in memory per process, so in a
new process get_accounts() is [] until a signin step has run (then "silent"/"latency" have an account);
pymsalruntime's own cache persists in the session's keyring across processes. Each step prints ONE JSON
object on stdout:

  signin                   get_accounts(); acquire_token_silent(scopes, account=accounts[0]) if any;
                           if no result: acquire_token_interactive(scopes,
                           parent_window_handle=app.CONSOLE_WINDOW_HANDLE).
      {"step":"signin","access_token":…,"token_source":…,"username":<id_token_claims preferred_username>,
       "expires_in":…,"error":…,"error_description":…,"path":"silent"|"interactive","accounts":<after>,
       "broker_enabled":…}
      "path" says which MSAL call returned ("interactive" also when the broker answered the silent sign-in
      pymsalruntime makes inside it); "broker_enabled" is MSAL's app._enable_broker (false: it fell back).
      [--interactive-timeout S]  acquire_token_interactive(timeout=S) (default 10; 0: none). The broker
                           ignores it; it only bounds MSAL's browser fallback when no broker answers,
                           which otherwise waits forever for a browser that never comes.
  silent [--force-refresh] get_accounts(); acquire_token_silent(scopes, account=accounts[0],
                           force_refresh=…) if any. Same shape (without path/broker_enabled) plus
                           "accounts": n and "force_refresh"; access_token null when no account or result.
  latency [--count N]      acquire_token_silent(scopes, account=accounts[0]) N times (default 20):
      {"step":"latency","count":N,"accounts":n,"p50_ms":…,"p90_ms":…,"min_ms":…,"max_ms":…,
       "broker":<results with token_source broker>,"cache":…,"none":<calls without a token>}
  wait --for FILE [--timeout S]  waits until FILE exists (default 120 s), so a test can change the device
                           (a sign-out, the next worker) between two steps of one app process:
      {"step":"wait","found":true|false}

Global options may also follow a step. Full tokens are printed only on stdout (in the JSON), never on
stderr. An exception in a step (e.g. BrowserInteractionTimeoutError after the fallback) is printed as that
step's object with "error": "exception", "error_description": "<type>: <message>" (traceback on stderr),
and the next steps still run. MSAL's own warnings go to stderr, among them "Broker is unavailable on this
platform. We will fallback to non-broker." when no broker answers.
Exit status: 0 when every step got an access token (latency: every call), 2 when a step got none,
1 when the app could not be made (traceback on stderr), 64 when called without a step.
"""
import argparse
import json
import os
import sys
import time
import traceback

import msal

STEPS = ("signin", "silent", "latency", "wait")
DEFAULT_SCOPE = "https://graph.microsoft.com/User.Read"
DEFAULT_AUTHORITY = "https://login.microsoftonline.com/organizations"


def add_globals(p):
    p.add_argument("--client-id")
    p.add_argument("--scope", action="append", default=None)
    p.add_argument("--authority", default=None)


def parse(argv):
    segments, current = [], None
    pre = []
    for tok in argv:
        if tok in STEPS:
            current = [tok]
            segments.append(current)
        elif current is None:
            pre.append(tok)
        else:
            current.append(tok)
    if any(t in ("-h", "--help") for t in argv) or not segments:
        print(__doc__, file=sys.stderr)
        sys.exit(0 if segments or any(t in ("-h", "--help") for t in argv) else 64)

    g = argparse.ArgumentParser(prog="msal_app.py")
    add_globals(g)
    glob = g.parse_args(pre)
    steps = []
    for seg in segments:
        p = argparse.ArgumentParser(prog=f"msal_app.py {seg[0]}")
        add_globals(p)
        if seg[0] == "signin":
            p.add_argument("--interactive-timeout", type=float, default=10.0)
        elif seg[0] == "silent":
            p.add_argument("--force-refresh", action="store_true")
        elif seg[0] == "latency":
            p.add_argument("--count", type=int, default=20)
        elif seg[0] == "wait":
            p.add_argument("--for", dest="path", required=True)
            p.add_argument("--timeout", type=float, default=120.0)
        a = p.parse_args(seg[1:])
        for k in ("client_id", "authority"):
            if getattr(a, k) is not None:
                setattr(glob, k, getattr(a, k))
        if a.scope:
            glob.scope = (glob.scope or []) + a.scope
        steps.append((seg[0], a))
    if not glob.client_id:
        g.error("--client-id is required")
    glob.scope = glob.scope or [DEFAULT_SCOPE]
    glob.authority = glob.authority or DEFAULT_AUTHORITY
    return glob, steps


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def shape(step, result):
    result = result or {}
    claims = result.get("id_token_claims") or {}
    return {
        "step": step,
        "access_token": result.get("access_token"),
        "token_source": result.get("token_source"),
        "username": claims.get("preferred_username"),
        "expires_in": result.get("expires_in"),
        "error": result.get("error"),
        "error_description": result.get("error_description"),
    }


def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n*q/100)
    return sorted_values[int(rank) - 1]


def run_step(app, scopes, name, a):
    if name == "signin":
        accounts = app.get_accounts()
        result = app.acquire_token_silent(scopes, account=accounts[0]) if accounts else None
        path = "silent"
        if not result:
            path = "interactive"
            kwargs = {"timeout": a.interactive_timeout} if a.interactive_timeout > 0 else {}
            result = app.acquire_token_interactive(
                scopes, parent_window_handle=app.CONSOLE_WINDOW_HANDLE, **kwargs)
        out = shape("signin", result)
        out["path"] = path
        out["accounts"] = len(app.get_accounts())
        out["broker_enabled"] = getattr(app, "_enable_broker", None)
        return out
    if name == "silent":
        accounts = app.get_accounts()
        result = (app.acquire_token_silent(scopes, account=accounts[0], force_refresh=a.force_refresh)
                  if accounts else None)
        out = shape("silent", result)
        out["accounts"] = len(accounts)
        out["force_refresh"] = a.force_refresh
        return out
    if name == "wait":
        deadline = time.monotonic() + a.timeout
        while not os.path.exists(a.path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"step": "wait", "found": os.path.exists(a.path)}
    # latency
    accounts = app.get_accounts()
    times, sources = [], {"broker": 0, "cache": 0, "none": 0}
    if accounts:
        for _ in range(a.count):
            t0 = time.perf_counter()
            result = app.acquire_token_silent(scopes, account=accounts[0])
            times.append((time.perf_counter() - t0) * 1000.0)
            if result and result.get("access_token"):
                src = result.get("token_source")
                sources[src if src in sources else "cache"] += 1
            else:
                sources["none"] += 1
    else:
        sources["none"] = a.count
    times.sort()
    r = lambda v: None if v is None else round(v, 2)
    return {"step": "latency", "count": a.count, "accounts": len(accounts),
            "p50_ms": r(percentile(times, 50)), "p90_ms": r(percentile(times, 90)),
            "min_ms": r(times[0] if times else None), "max_ms": r(times[-1] if times else None),
            **sources}


def main():
    opts, steps = parse(sys.argv[1:])
    scopes = opts.scope

    # The stock app: exactly what a developer writes.
    app = msal.PublicClientApplication(opts.client_id, authority=opts.authority, enable_broker_on_linux=True)

    ok = True
    for name, a in steps:
        try:
            out = run_step(app, scopes, name, a)
        except Exception as e:  # report it as the step's result; the next steps still run
            traceback.print_exc()
            out = shape(name, {"error": "exception", "error_description": f"{type(e).__name__}: {e}"})
        emit(out)
        if name == "latency":
            ok = ok and out.get("none", 1) == 0 and out.get("error") is None
        elif name == "wait":
            ok = ok and out["found"]
        else:
            ok = ok and bool(out["access_token"])
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
