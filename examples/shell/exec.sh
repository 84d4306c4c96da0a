#!/usr/bin/env bash
# The README's command example: run a command under the lock, see who holds it, list locks.
# (ZK_CONNECT names the ensemble, as --zk would.)
set -euo pipefail
# ANCHOR: main
# At most one of these at a time, across machines; -n: give up at once if it is held (exit 1).
zklock exec -n --label nightly-report /locks/nightly-report -- sh -c 'echo "token $ZKLOCK_FENCING_TOKEN"'
# Wait up to 10 minutes for the previous deploy, then deploy.
zklock exec -w 600 --label "deploy-$(id -un)" /locks/deploy -- echo deploying
# At most 3 at once: one of 3 leases of a semaphore.
zklock exec --max 3 -w 600 /semaphores/backend -- echo nightly job
# Who holds and who waits (exit 3: free), and every lock under a prefix.
zklock status /locks/deploy || true
zklock ls /locks
# ANCHOR_END: main
