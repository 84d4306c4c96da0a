"""The package's types under mypy --strict (issue 48, item 9): the asyncio acquisitions are
coroutines, so they go to create_task, TaskGroup.create_task and asyncio.run, and a forgotten
`await lock.acquire_async()` (which at run time leaves the critical section unlocked) is an error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def mypy(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(program)],
        capture_output=True, text=True, cwd=os.path.dirname(__file__), timeout=300,
    )


def test_acquire_async_is_a_coroutine_to_the_type_checker(tmp_path: Path) -> None:
    program = tmp_path / "tasks.py"
    program.write_text(textwrap.dedent("""
        import asyncio
        import zklock

        async def main(lock: zklock.Lock, multi: zklock.MultiLock) -> None:
            held: asyncio.Task[bool] = asyncio.create_task(lock.acquire_async())
            guard: asyncio.Task[zklock.MultiGuard] = asyncio.create_task(multi.acquire_async())
            assert await held
            (await guard).release()

        def run(lock: zklock.Lock) -> bool:
            return asyncio.run(lock.acquire_async())
        """))
    result = mypy(program)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_forgotten_await_does_not_type_check(tmp_path: Path) -> None:
    program = tmp_path / "forgotten.py"
    program.write_text(textwrap.dedent("""
        import zklock

        async def critical(lock: zklock.Lock, multi: zklock.MultiLock) -> None:
            lock.acquire_async()
            multi.acquire_async()
        """))
    result = mypy(program)
    assert result.returncode != 0
    assert result.stdout.count("[unused-coroutine]") == 2, result.stdout
