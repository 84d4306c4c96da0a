"""Runs every example of this directory against the server ZK_CONNECT names (scripts/test-docs
starts one): each in a process of its own, as a reader would run it. secured.py names hosts that
do not exist, so it is only byte-compiled; demo_worker.py is scripts/demo's worker."""
import pathlib
import py_compile
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
RUN = sorted(p for p in HERE.glob("*.py") if p.name not in ("test_examples.py", "secured.py", "demo_worker.py"))


@pytest.mark.parametrize("example", RUN, ids=[p.name for p in RUN])
def test_runs(example: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{example.name} exited {done.returncode}:\n{done.stdout}{done.stderr}"


def test_secured_compiles() -> None:
    py_compile.compile(str(HERE / "secured.py"), doraise=True)
