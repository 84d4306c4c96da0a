# The Node binding (bindings-node/) running bench/node/bench.mjs: sourced by scripts/bench.
IMPLS+=(zklock-node)

prepare_zklock-node() {
    (cd "$ROOT/bindings-node" && npm run --silent build)
}
run_zklock-node() {
    node "$ROOT/bench/node/bench.mjs"
}
