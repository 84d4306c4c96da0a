#!/usr/bin/env bash
# Operations: a shell script that locks its own remainder with `zklock hold`.
set -euo pipefail
# ANCHOR: main
coproc LOCK { zklock hold --label "script-$$" /locks/deploy; }
read -r NODE TOKEN <&"${LOCK[0]}" # held once this line is read
echo "holding $NODE with fencing token $TOKEN"
zklock status /locks/deploy
exec {LOCK[1]}>&- # closing its stdin releases the lock
wait "$LOCK_PID"
# ANCHOR_END: main
