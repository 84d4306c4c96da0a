"""The ``zklock`` command as the wheel installs it: the console script (and ``python -m zklock``),
which runs the Rust command inside a Python process. What the Rust binary's own tests (cli/tests)
prove is not repeated; these prove the Python process does not change it: the child COMMAND's
signal state, forwarded signals, Ctrl-C, exit codes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import zklock

# pip installs the console script beside the interpreter of the environment it installs into.
COMMAND = Path(sys.executable).parent / "zklock"


def run(*args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [str(COMMAND), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "ZK_CONNECT"},
    )


def test_the_console_script_is_installed_and_says_the_version() -> None:
    assert COMMAND.is_file(), f"no console script at {COMMAND}"
    done = run("--version")
    assert done.returncode == 0 and done.stdout == f"zklock {zklock.__version__}\n", done


def test_python_m_zklock_is_the_same_command_under_its_own_name() -> None:
    shown = subprocess.run([sys.executable, "-m", "zklock", "exec", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "Usage: python -m zklock exec" in shown.stdout, shown
    bad = subprocess.run([sys.executable, "-m", "zklock", "frobnicate"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 64 and "frobnicate" in bad.stderr, bad


def test_exec_runs_the_command_holding_the_lock_with_python_s_ignored_signals_at_their_defaults(
    zk_connect: str, path: str
) -> None:
    # Python ignores SIGPIPE and SIGXFSZ; a process started with either ignored keeps it ignored.
    # The binary's COMMAND starts with neither ignored, and nothing blocked: so must this one.
    script = 'echo "token=$ZKLOCK_FENCING_TOKEN"; grep -E "^Sig(Ign|Blk):" /proc/self/status; ' + (
        f'{COMMAND} status --zk "{zk_connect}" "$ZKLOCK_PATH" >/dev/null && echo held'
    )
    done = run("exec", "--zk", zk_connect, path, "--", "sh", "-c", script)
    assert done.returncode == 0, done
    out = done.stdout.splitlines()
    assert out[0].startswith("token=") and int(out[0][len("token=") :]) > 0, done.stdout
    assert out[-1] == "held", done.stdout  # zklock status, from COMMAND, found the lock held
    masks = {name: int(value, 16) for name, _, value in (line.partition(":") for line in out[1:-1])}
    ignored, blocked = masks["SigIgn"], masks["SigBlk"]
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM):
        assert not ignored & (1 << (sig - 1)), f"{sig.name} ignored in COMMAND: {done.stdout}"
    assert blocked == 0, f"signals blocked in COMMAND: {done.stdout}"
    assert run("status", "--zk", zk_connect, path).returncode == 3  # free once COMMAND is done


def test_sigterm_to_the_command_reaches_its_child_and_the_exit_status_says_so(zk_connect: str, path: str) -> None:
    child = subprocess.Popen(
        [str(COMMAND), "exec", "--zk", zk_connect, path, "--", "sh", "-c", "echo held; exec sleep 60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        child.send_signal(signal.SIGTERM)
        # sleep died of it, and zklock dies of the same signal once the lock is released
        assert child.wait(timeout=20) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert run("status", "--zk", zk_connect, path).returncode == 3


def test_ctrl_c_ends_status_at_once_while_it_waits_for_a_server() -> None:
    # A "server" that accepts and never answers: status waits for a session (up to 60 s here).
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        child = subprocess.Popen(
            [str(COMMAND), "status", "--zk", f"127.0.0.1:{port}", "--connect-timeout", "60", "/x"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            silent.settimeout(20)
            connection, _ = silent.accept()  # the command is connecting: past its start-up
            with connection:
                child.send_signal(signal.SIGINT)
                # Killed by SIGINT, as the binary is; Python's own handler would have left it waiting.
                assert child.wait(timeout=10) == -signal.SIGINT
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()


@pytest.mark.parametrize("bad", [["exec", "--zk", "127.0.0.1:1", "relative/path", "--", "true"]])
def test_bad_usage_exits_64_before_connecting(bad: list[str]) -> None:
    done = run(*bad)
    assert done.returncode == 64 and "PATH" in done.stderr, done
