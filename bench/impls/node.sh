# The Node binding (bindings-node/) running bench/node/bench.mjs: sourced by scripts/bench.
IMPLS+=(zklock-node)

prepare_zklock-node() {
    [[ -z "${BENCH_NODE_SCRIPT:-}" ]] || return 0
    (cd "$ROOT/bindings-node" && npm run --silent build)
}
run_zklock-node() {
    # --expose-gc: the many_locks workload collects before it reads the RSS.
    node --expose-gc "${BENCH_NODE_SCRIPT:-$ROOT/bench/node/bench.mjs}"
}
