// zklock benchmark through the Node binding: the workloads of bench/src/main.rs, with the same
// parameters, against the server named by ZK_CONNECT (scripts/bench starts one). Prints one
// JSON line with the same keys; progress goes to stderr. There is no Node ZooKeeper client to
// measure a raw floor with, so `floor_cycles_per_s` is null.
import { Client } from '../../bindings-node/index.mjs'

const CONTENDERS = 8
const connect = process.env.ZK_CONNECT
if (!connect) throw new Error('ZK_CONNECT names the server (scripts/bench sets it)')
const measureS = Number(process.env.BENCH_SECONDS ?? 5) || 5
const warmupS = Math.min(Number(process.env.BENCH_WARMUP_SECONDS ?? 1), measureS)
const reentrantIters = Number(process.env.BENCH_REENTRANT_ITERS ?? 1_000_000)
const selected = (process.env.BENCH_WORKLOADS ?? '').split(',').map((w) => w.trim()).filter(Boolean)
const wanted = (name) => selected.length === 0 || selected.includes(name)
const base = `/zklock-bench/node-${process.pid}`

const now = () => process.hrtime.bigint()
const seconds = (ns) => Number(ns) / 1e9
const log = (message) => process.stderr.write(`[zklock-node] ${message}\n`)

function percentileUs(sorted, p) {
  return sorted[Math.round((sorted.length - 1) * p)] / 1e3
}

async function cycles(lock, budgetS, samples) {
  const started = now()
  const budget = BigInt(Math.round(budgetS * 1e9))
  let count = 0
  while (now() - started < budget) {
    const t0 = now()
    const hold = await lock.acquire()
    const t1 = now()
    await hold.release()
    const t2 = now()
    if (samples) {
      samples.acquire.push(Number(t1 - t0))
      samples.release.push(Number(t2 - t1))
    }
    count++
  }
  return { count, time: seconds(now() - started) }
}

async function uncontended(client) {
  const lock = client.lock(`${base}/uncontended`)
  await cycles(lock, warmupS)
  // In slices, as the Rust benchmark measures (there alternating with its floor).
  const slices = Math.max(Math.round(measureS * 4), 4)
  const slice = measureS / slices / 2
  const samples = { acquire: [], release: [] }
  let count = 0
  let time = 0
  for (let i = 0; i < slices; i++) {
    const run = await cycles(lock, slice, samples)
    count += run.count
    time += run.time
  }
  samples.acquire.sort((a, b) => a - b)
  samples.release.sort((a, b) => a - b)
  return { cyclesPerS: count / time, ...samples }
}

async function contended(path) {
  const clients = await Promise.all(Array.from({ length: CONTENDERS }, () => Client.connect(connect)))
  let handoffs = 0
  let inside = 0
  let stop = false
  const loops = clients.map(async (client) => {
    const lock = client.lock(path)
    while (!stop) {
      const hold = await lock.acquire()
      if (++inside !== 1) throw new Error('mutual exclusion violated')
      handoffs++
      inside--
      await hold.release()
    }
  })
  await new Promise((resolve) => setTimeout(resolve, warmupS * 1000))
  const startCount = handoffs
  const started = now()
  await new Promise((resolve) => setTimeout(resolve, measureS * 1000))
  const rate = (handoffs - startCount) / seconds(now() - started)
  stop = true
  await Promise.all(loops)
  await Promise.all(clients.map((client) => client.close()))
  return rate
}

async function reentrantNs(client, path) {
  const lock = client.lock(path)
  const outer = await lock.acquire()
  const pairs = async (n) => {
    const started = now()
    for (let i = 0; i < n; i++) {
      const hold = await lock.acquire()
      await hold.release()
    }
    return Number(now() - started) / n
  }
  // Nested calls re-enter only as the holder's flow: run them under the outer hold.
  const best = await outer.run(async () => {
    await pairs(Math.max(1, Math.round(reentrantIters / 5)))
    // The median of 5 rounds, as the Curator benchmark reports it.
    const rounds = []
    for (let round = 0; round < 5; round++) rounds.push(await pairs(reentrantIters))
    rounds.sort((a, b) => a - b)
    return rounds[2]
  })
  await outer.release()
  return best
}

const client = await Client.connect(connect)
let un = { cyclesPerS: NaN, acquire: [NaN], release: [NaN] }
if (wanted('uncontended')) {
  log('uncontended...')
  un = await uncontended(client)
}
let handoffs = NaN
if (wanted('contended')) {
  log(`contended, ${CONTENDERS} sessions...`)
  handoffs = await contended(`${base}/contended`)
}
let reentrant = NaN
if (wanted('reentrant')) {
  log('reentrant...')
  reentrant = await reentrantNs(client, `${base}/reentrant`)
}
await client.close()

const round1 = (x) => (Number.isFinite(x) ? Math.round(x * 10) / 10 : null)
console.log(
  JSON.stringify({
    impl: 'zklock (node)',
    uncontended_cycles_per_s: round1(un.cyclesPerS),
    acquire_p50_us: round1(percentileUs(un.acquire, 0.5)),
    acquire_p99_us: round1(percentileUs(un.acquire, 0.99)),
    release_p50_us: round1(percentileUs(un.release, 0.5)),
    release_p99_us: round1(percentileUs(un.release, 0.99)),
    handoffs_per_s: round1(handoffs),
    reentrant_ns: round1(reentrant),
    floor_cycles_per_s: null,
  }),
)
