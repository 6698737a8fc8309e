#!/usr/bin/python3
"""Counts the Secret Service items pymsalruntime wrote (schema com.microsoft.identity.secret).

Run with Debian's /usr/bin/python3 (python3-dbus) as the app's uid inside a Tests/MSAL/msal-session sandbox
(DBUS_SESSION_BUS_ADDRESS set):

  msal-session run DIR -- /usr/bin/python3 Tests/MSAL/keyring_items.py [--schema S] [--delete]

Prints one JSON object on stdout: {"items": N, "unlocked": U, "locked": L}
  items: all matching items (unlocked + locked), from org.freedesktop.Secret.Service.SearchItems({"xdg:schema": S}).
  --delete: then deletes the unlocked ones (org.freedesktop.Secret.Item.Delete) and adds "deleted": D.
Exit status: 0; 1 when the Secret Service cannot be reached (message on stderr).
"""
import argparse
import json
import sys

import dbus

SCHEMA = "com.microsoft.identity.secret"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schema", default=SCHEMA)
    ap.add_argument("--delete", action="store_true")
    args = ap.parse_args()
    try:
        bus = dbus.SessionBus()
        service = dbus.Interface(bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets"),
                                 "org.freedesktop.Secret.Service")
        unlocked, locked = service.SearchItems(dbus.Dictionary({"xdg:schema": args.schema}, signature="ss"))
    except dbus.exceptions.DBusException as e:
        print(f"keyring_items: Secret Service not reachable: {e.get_dbus_name()}: {e.get_dbus_message()}",
              file=sys.stderr)
        return 1
    out = {"items": len(unlocked) + len(locked), "unlocked": len(unlocked), "locked": len(locked)}
    if args.delete:
        deleted = 0
        for path in unlocked:
            item = dbus.Interface(bus.get_object("org.freedesktop.secrets", path), "org.freedesktop.Secret.Item")
            item.Delete()
            deleted += 1
        out["deleted"] = deleted
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
