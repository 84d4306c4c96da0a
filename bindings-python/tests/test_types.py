"""The package's types under mypy --strict and pyright strict (issue 48, item 9): the asyncio
acquisitions are coroutines, so they go to create_task, TaskGroup.create_task and asyncio.run,
and a forgotten `await lock.acquire_async()` (which at run time leaves the critical section
unlocked) is an error; `Participant.identity` is a TypedDict; `lock.condition()` is the typed
`threading.Condition(lock)`. Both checkers come with the test venv (scripts/test-python)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import zklock


def mypy(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(program)],
        capture_output=True, text=True, cwd=os.path.dirname(__file__), timeout=300,
    )


def pyright(tmp_path: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    """pyright in strict mode (its own run of the npm package, which `pip install pyright`
    fetches on first use), against this interpreter's installed zklock."""
    config = tmp_path / "pyrightconfig.json"
    config.write_text('{"typeCheckingMode": "strict", "reportMissingModuleSource": false}')
    return subprocess.run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, "-p", str(config), *map(str, paths)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )


def test_the_package_type_checks_under_pyright_strict(tmp_path: Path) -> None:
    result = pyright(tmp_path, Path(zklock.__file__).parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout, result.stdout


TYPED = """
    import asyncio
    import threading
    from typing import Optional
    import zklock

    async def main(lock: zklock.Lock, multi: zklock.MultiLock) -> None:
        held: asyncio.Task[bool] = asyncio.create_task(lock.acquire_async())
        guard: asyncio.Task[zklock.MultiGuard] = asyncio.create_task(multi.acquire_async())
        assert await held
        (await guard).release()

    def run(lock: zklock.Lock) -> bool:
        return asyncio.run(lock.acquire_async())

    def who(lock: zklock.Lock) -> Optional[str]:
        holder = lock.holder()
        if holder is None or holder.identity is None:
            return None
        identity: zklock.ParticipantIdentity = holder.identity
        pid: int = identity["pid"]
        identifier: Optional[str] = identity["identifier"]
        return f"{identity['host']}:{pid} {identity['owner']} {identity['lang']} {identifier}"

    def wait(lock: zklock.Lock, items: list[int]) -> int:
        condition: threading.Condition = lock.condition()
        with condition:
            condition.wait_for(lambda: items)
            return items.pop()
    """


def test_typed_programs_check_under_both(tmp_path: Path) -> None:
    program = tmp_path / "typed.py"
    program.write_text(textwrap.dedent(TYPED))
    checked = mypy(program)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked = pyright(tmp_path, program)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_mistakes_do_not_type_check_under_pyright(tmp_path: Path) -> None:
    """A forgotten await, an identity key that is not there, an identity field used as the wrong
    type: each an error (the identity ones passed before: it was a dict of Any)."""
    program = tmp_path / "mistakes.py"
    program.write_text(textwrap.dedent("""
        import zklock

        async def critical(lock: zklock.Lock, multi: zklock.MultiLock) -> None:
            lock.acquire_async()
            multi.acquire_async()

        def identity(participant: zklock.Participant) -> None:
            identity = participant.identity
            assert identity is not None
            print(identity["hostname"])
            pid: str = identity["pid"]
            print(pid)
        """))
    checked = pyright(tmp_path, program)
    assert checked.returncode != 0
    assert checked.stdout.count("reportUnusedCoroutine") == 2, checked.stdout
    assert '"hostname" is not a defined key' in checked.stdout, checked.stdout
    assert re.search(r'mistakes.py:12:\d+ - error: Type "int" is not assignable to declared type "str"', checked.stdout)
    checked = mypy(program)
    assert checked.returncode != 0
    assert checked.stdout.count("[unused-coroutine]") == 2, checked.stdout
    assert re.search(r'mistakes.py:11: error: .*"hostname"', checked.stdout), checked.stdout
    assert re.search(r"mistakes.py:12: error: .*\[assignment\]", checked.stdout), checked.stdout


def test_the_identity_is_what_the_typeddict_says(client: zklock.Client, path: str) -> None:
    lock = client.lock(path, identifier="job-7")
    with lock:
        holder = lock.holder()
        assert holder is not None and holder.identity is not None
        identity = holder.identity
        assert set(identity) == set(zklock.ParticipantIdentity.__annotations__)
        assert isinstance(identity["host"], str) and identity["pid"] == os.getpid()
        assert identity["lang"] == "python" and identity["identifier"] == "job-7"
        assert identity["owner"].startswith("thread:")


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
