"""Security, ACLs in Python: a lock only clients with the same digest credentials may take."""
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
# ANCHOR: main
with zklock.Client(hosts, auth=("app", "secret")) as client:
    lock = client.lock("/locks/report-protected", acl="creator_all_world_read")  # or "creator_all", "open"
    with lock:
        pass
# ANCHOR_END: main

with zklock.Client(hosts) as stranger:  # no credentials: refused
    try:
        stranger.lock("/locks/report-protected").acquire(timeout=5)
        raise SystemExit("a stranger took a protected lock")
    except zklock.PermissionDeniedError:
        pass
