# Python impls for scripts/bench (sourced there): zklock's Python binding and kazoo 2.11, both run
# by bench/python/bench.py with the core benchmark's workloads and parameters. Both use the venv
# that scripts/test-python sets up (target/python-venv: kazoo, and zklock from
# `pip install ./bindings-python`, a release build).
IMPLS+=(zklock-python kazoo)
# The scale workload (asyncio tasks on one lock) is zklock's only.
NO_SCALE_IMPLS+=(kazoo)

PYTHON_BENCH_VENV="${BENCH_PYTHON_VENV:-$ROOT/target/python-venv}"

prepare_zklock-python() {
    [[ -z "${BENCH_PYTHON_VENV:-}" ]] || return 0
    "$ROOT/scripts/test-python" --install-only
}
run_zklock-python() {
    "$PYTHON_BENCH_VENV/bin/python" "$ROOT/bench/python/bench.py" zklock
}

prepare_kazoo() {
    # Same venv: set up once when both impls are selected.
    "$PYTHON_BENCH_VENV/bin/python" -c 'import kazoo, zklock' 2>/dev/null || "$ROOT/scripts/test-python" --install-only
}
run_kazoo() {
    "$PYTHON_BENCH_VENV/bin/python" "$ROOT/bench/python/bench.py" kazoo
}
