"""``python -m zklock --version``: which zklock is installed, and where."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

import zklock


DESCRIPTION = "Says which zklock is installed, and where (with --version, only the version)."


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zklock", description=DESCRIPTION)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        print(f"zklock {zklock.__version__}")
        return 0
    print(f"zklock {zklock.__version__} ({os.path.dirname(zklock.__file__)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
