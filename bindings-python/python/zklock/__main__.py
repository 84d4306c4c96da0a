"""The ``zklock`` command: the console script ``zklock`` and ``python -m zklock``.

The same program as the ``zklock`` binary of ``make install`` (the Rust ``cli`` crate, linked into
the native module), so ``pip install zookeeper-lock`` gives an operator the command too. ``zklock --help``
says what it does; ``zklock --version`` which zklock is installed.
"""

from __future__ import annotations

import signal
import sys
from typing import Optional, Sequence

from zklock import _native  # pyright: ignore[reportPrivateUsage]  # the package's own


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    """Runs the command with ``argv`` (default: this process's arguments) and returns its exit
    status. Call it on the main thread, before starting any other thread: the command owns the
    process while it runs (signals, its child COMMAND), as the binary does."""
    args = list(sys.argv[1:] if argv is None else argv)
    # As a Rust program starts: SIGINT at its default, so that Ctrl-C ends `zklock status` at once
    # (Python's handler only sets a flag, which the command never looks at); SIGXFSZ too, which
    # Python ignores and a child would inherit ignored. SIGPIPE stays ignored, as Rust has it (the
    # command's children get it back at its default).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    return _native._command([prog or sys.argv[0] or "zklock", *args])


if __name__ == "__main__":
    sys.exit(main(prog="python -m zklock"))
