"""The installed package: typed (py.typed, stubs that match the native module), abi3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import zklock


def test_stubs_match_the_native_module():
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "zklock"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_type_checks_strictly():
    package = Path(zklock.__file__).parent
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "-p", "zklock"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (package / "py.typed").exists() and (package / "_native.pyi").exists()


def test_the_native_module_is_an_abi3_build_inside_the_package():
    from zklock import _native

    assert Path(_native.__file__).parent == Path(zklock.__file__).parent
    assert Path(_native.__file__).name == "_native.abi3.so"


def test_the_installed_wheel_is_the_abi3_one_for_this_python():
    # CPython 3.10+ takes the cp310-abi3 wheel, whose methods are called by METH_FASTCALL (the
    # 3.9 ABI's tuple-and-dict calls cost a re-entry ~30 %); 3.9 the cp39-abi3 one.
    from importlib.metadata import distribution

    wheel = distribution("zookeeper-lock").read_text("WHEEL") or ""
    tags = [line.split(": ", 1)[1] for line in wheel.splitlines() if line.startswith("Tag: ")]
    expected = "cp39-abi3" if sys.version_info < (3, 10) else "cp310-abi3"
    assert tags and all(tag.startswith(expected + "-") for tag in tags), tags


def test_version_is_the_installed_distribution_s_and_python_m_zklock_prints_it():
    from importlib.metadata import version

    assert zklock.__version__ == version("zookeeper-lock")
    printed = subprocess.run(
        [sys.executable, "-m", "zklock", "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert printed == f"zklock {zklock.__version__}\n"


def test_help_reads_as_text_and_shows_only_public_parameters():
    shown = subprocess.run([sys.executable, "-m", "zklock", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "``" not in shown.stdout, shown.stdout
    import inspect

    assert "_side" not in str(inspect.signature(zklock.Lock))
    assert zklock.Client.__init__.__doc__ and "connect_timeout" in zklock.Client.__init__.__doc__
