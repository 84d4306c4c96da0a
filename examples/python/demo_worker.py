"""A Python worker of the README demo: holds /zklock-demo/lock ROUNDS times and prints one line per
hold in the demo's format, `HELD name pid token sequence enter_us exit_us python`.

Usage: ZK_CONNECT=host:port python3 demo_worker.py NAME ROUNDS
"""

import os
import sys
import time

import zklock


def now_us() -> int:
    return time.time_ns() // 1000


def main() -> None:
    name, rounds = sys.argv[1], int(sys.argv[2])
    with zklock.Client(os.environ["ZK_CONNECT"]) as client:
        lock = client.lock("/zklock-demo/lock")
        for _ in range(rounds):
            with lock:
                entered = now_us()
                time.sleep(0.05)  # the protected work: hold briefly so the others queue up
                exited = now_us()
                print(f"HELD {name} {os.getpid()} {lock.fencing_token} {lock.sequence} {entered} {exited} python",
                      flush=True)


if __name__ == "__main__":
    main()
