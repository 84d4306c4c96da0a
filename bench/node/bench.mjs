// zklock benchmark through the Node binding: the workloads of bench/src/main.rs, with the same
// parameters, against the server named by ZK_CONNECT (scripts/bench starts one). Prints one
// JSON line with the same keys; progress goes to stderr. There is no Node ZooKeeper client to
// measure a raw floor with, so `floor_cycles_per_s` is null. The scale workload (N promises on
// one Lock, one Client) and many_paths (a new Lock per request over BENCH_MANY_PATHS paths, one
// Client) run only when BENCH_WORKLOADS names them.
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { Client } from '../../bindings-node/index.mjs'

const CONTENDERS = 8
const connect = process.env.ZK_CONNECT
if (!connect) throw new Error('ZK_CONNECT names the server (scripts/bench sets it)')
const measureS = Number(process.env.BENCH_SECONDS ?? 5) || 5
const warmupS = Math.min(Number(process.env.BENCH_WARMUP_SECONDS ?? 1), measureS)
const reentrantIters = Number(process.env.BENCH_REENTRANT_ITERS ?? 1_000_000)
const selected = (process.env.BENCH_WORKLOADS ?? '').split(',').map((w) => w.trim()).filter(Boolean)
const wanted = (name) => selected.length === 0 || selected.includes(name)
const scaleWaiters = (process.env.BENCH_SCALE_WAITERS || '1000,5000,10000')
  .split(',')
  .filter((n) => n.trim())
  .map(Number)
const scaleTimeoutS = Number(process.env.BENCH_SCALE_TIMEOUT || 300)
const manyPaths = Number(process.env.BENCH_MANY_PATHS || 1000)
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

/** A line of /proc/self/status (VmRSS, VmHWM), in MB. */
function statusMb(field) {
  const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith(`${field}:`))
  return line ? Number(line.split(/\s+/)[1]) / 1024 : NaN
}

/** Sends a four-letter word to the first server of ZK_CONNECT and resolves to its reply, or, with
 * `onChunk`, hands it each chunk of the reply as it arrives (and resolves once it ends). */
function fourLetter(word, onChunk) {
  const address = connect.split(',')[0].split('/')[0]
  const colon = address.lastIndexOf(':')
  return new Promise((resolve, reject) => {
    const chunks = onChunk === undefined ? [] : null
    const socket = net.connect(Number(address.slice(colon + 1)), address.slice(0, colon), () => socket.write(word))
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no reply to ${word}`)))
    socket.on('data', (chunk) => (chunks === null ? onChunk(chunk) : chunks.push(chunk)))
    socket.on('end', () => resolve(chunks === null ? undefined : Buffer.concat(chunks).toString()))
    socket.on('error', reject)
  })
}

/** The lock nodes under `path` on the server: the ephemerals that `dump` lists there (a line whose
 * parent path ends with `path`: with a chroot the server names the full path). Counted in the
 * reply's bytes as they arrive: the reply, megabytes for a long queue, made into strings would
 * be live in V8's young generation while counted, and V8 sizes that generation by what
 * survives: the harness would grow the heap it measures. */
async function queuedOnServer(path) {
  const prefix = Buffer.from(`${path}/`)
  const [NEWLINE, SLASH] = [0x0a, 0x2f]
  let count = 0
  let rest = Buffer.alloc(0)
  const countLines = (bytes, end) => {
    for (let at = bytes.indexOf(prefix); at !== -1 && at < end; at = bytes.indexOf(prefix, at + 1)) {
      const lineEnd = bytes.indexOf(NEWLINE, at)
      const name = at + prefix.length
      const slash = bytes.indexOf(SLASH, name)
      if (slash === -1 || slash > (lineEnd === -1 ? end : lineEnd)) count++
    }
  }
  await fourLetter('dump', (chunk) => {
    const bytes = rest.length ? Buffer.concat([rest, chunk]) : chunk
    const complete = bytes.lastIndexOf(NEWLINE) + 1 // the lines this chunk completes
    countLines(bytes, complete)
    rest = Buffer.from(bytes.subarray(complete))
  })
  countLines(rest, rest.length)
  return count
}

async function serverWatches() {
  const reply = await fourLetter('wchs')
  const line = reply.split('\n').find((l) => l.startsWith('Total watches:'))
  if (!line) throw new Error(`no watch count in the wchs reply: ${JSON.stringify(reply)}`)
  return Number(line.split(':')[1])
}

/** The watch count once it stops changing (three equal samples 200 ms apart, at most 30 s): the
 * waiters set their watches after their creates. */
async function settledWatches() {
  const until = Date.now() + 30_000
  let last = await serverWatches()
  let same = 1
  while (same < 3 && Date.now() < until) {
    await sleep(200)
    const now = await serverWatches()
    same = now === last ? same + 1 : 1
    last = now
  }
  return last
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * One N: a gate holder takes the lock; N promises (withLock on one Lock, one Client) queue on it.
 * Each withLock sends its create before its first await, so the creates reach the server in
 * index order. Once all N nodes are queued and the watches settled, the gate is released and
 * the chain timed until the last waiter has released.
 *
 * The promises are gathered as a program would (`Promise.all` of them as they are made), not once
 * the chain starts: then its N reactions would be made just as the handoffs begin, survive V8's
 * first young collections there, and double its young generation (8-12 MB resident) for the
 * harness's sake, not the waiters'.
 */
async function scaleChain(client, path, waiters, progress) {
  const lock = client.lock(path)
  const gate = await lock.acquire()
  let inside = 1 // the gate holder, until it releases
  let overlaps = 0
  const order = []
  const queueing = now()
  const chain = []
  for (let index = 0; index < waiters; index++) {
    chain.push(
      lock.withLock(async () => {
        if (++inside !== 1) overlaps++
        order.push(index)
        progress.handoffs++
        await new Promise(setImmediate) // let anything else run while this one holds
        inside--
      }),
    )
  }
  const all = Promise.all(chain)
  for (;;) {
    // Each queued waiter watches the node ahead: the cheap watch count gates the listing of
    // every ephemeral (megabytes of reply, ten times a second, in the process measured).
    if ((await serverWatches()) >= waiters) {
      progress.queued = (await queuedOnServer(path)) - 1 // less the gate holder's node
      if (progress.queued >= waiters) break
    }
    await sleep(100)
  }
  const queueS = seconds(now() - queueing)
  let watches = null
  try {
    watches = await settledWatches()
  } catch (err) {
    log(`scale ${waiters}: no watch count: ${err.message}`)
  }
  const queuedRss = statusMb('VmRSS')
  log(`scale ${waiters}: queued in ${queueS.toFixed(2)} s; ${watches} watches; RSS ${queuedRss.toFixed(1)} MB`)
  const started = now()
  inside--
  await gate.release()
  await all
  const elapsed = seconds(now() - started)
  const figures = {
    handoffs_per_s: waiters / elapsed,
    peak_rss_mb: statusMb('VmHWM'),
    queued_rss_mb: queuedRss,
    watches,
    queue_s: queueS,
    fifo: order.length === waiters && order.every((v, i) => v === i),
    overlaps,
  }
  log(
    `scale ${waiters}: ${figures.handoffs_per_s.toFixed(1)} handoffs/s in ${elapsed.toFixed(2)} s; ` +
      `peak RSS ${figures.peak_rss_mb.toFixed(1)} MB; FIFO ${figures.fifo}; overlaps ${overlaps}`,
  )
  return figures
}

/** For each N of BENCH_SCALE_WAITERS, the chain, bounded by BENCH_SCALE_TIMEOUT seconds: the
 * `scale_<N>_*` fields (`scale_<N>_error` if it could not finish). */
async function scale(client) {
  const out = {}
  for (const n of scaleWaiters) {
    log(`scale: ${n} promises on one lock, one client...`)
    let timer
    const progress = { queued: 0, handoffs: 0 }
    const expired = new Promise((resolve) => {
      timer = setTimeout(() => resolve(null), scaleTimeoutS * 1000)
    })
    try {
      const figures = await Promise.race([scaleChain(client, `${base}/scale-${n}`, n, progress), expired])
      if (figures === null) {
        out[`scale_${n}_error`] =
          `timed out after ${scaleTimeoutS} s (BENCH_SCALE_TIMEOUT) with ${progress.queued} of ${n} queued, ` +
          `${progress.handoffs} handoffs done`
        break // its waiters still hold the client: no further N in this process
      }
      for (const [k, v] of Object.entries(figures)) out[`scale_${n}_${k}`] = v
    } catch (err) {
      out[`scale_${n}_error`] = `${err.code ?? err.name}: ${err.message}`
      break
    } finally {
      clearTimeout(timer)
    }
  }
  return out
}

/**
 * Many distinct locks, as a service locks per request: one client, `manyPaths` paths, one loop
 * per path making a new Lock for each cycle and running `withLock` with an empty function. Total
 * cycles per second over the measured phase (after the warm-up).
 */
async function manyPathsCycles(client) {
  let count = 0
  let counting = false
  let stop = false
  const loops = Array.from({ length: manyPaths }, async (_, i) => {
    const path = `${base}/many-${i}`
    while (!stop) {
      await client.lock(path).withLock(() => {})
      if (counting) count++
    }
  })
  await sleep(warmupS * 1000)
  counting = true
  const started = now()
  await sleep(measureS * 1000)
  const elapsed = seconds(now() - started)
  const measured = count
  stop = true
  await Promise.all(loops)
  log(`many_paths ${manyPaths}: ${(measured / elapsed).toFixed(1)} cycles/s`)
  return measured / elapsed
}

/**
 * The many_locks workload (issue 52): for each N of BENCH_MANY_PATHS, N distinct paths on one
 * client, each with its own async function looping acquire and release of its own Lock. First
 * the memory of an idle held lock: N new Locks acquired (256 at a time) and left idle, the RSS
 * over that before, per lock; then released and dropped, and what is left.
 */
async function manyLocks(client, n) {
  const collect = () => globalThis.gc?.()
  const sleepMs = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  const bounded = async (items, op) => {
    let next = 0
    await Promise.all(Array.from({ length: Math.min(256, items.length) }, async () => {
      while (next < items.length) await op(items[next++])
    }))
  }
  collect()
  const before = statusMb('VmRSS')
  let held = Array.from({ length: n }, (_, i) => client.lock(`${base}/held-${n}/p${i}`))
  let holds = []
  await bounded(held, async (lock) => holds.push(await lock.acquire()))
  const heldRss = statusMb('VmRSS')
  await bounded(holds, (hold) => hold.release())
  held = holds = null
  collect()
  await sleepMs(200)
  const after = statusMb('VmRSS')

  let measuring = false
  let stop = false
  let count = 0
  const acquire = []
  let warmed = 0
  const loops = Array.from({ length: n }, async (_, i) => {
    const lock = client.lock(`${base}/many-${n}/p${i}`)
    let first = true
    while (!stop) {
      const t0 = now()
      const hold = await lock.acquire()
      const t1 = now()
      await hold.release()
      if (measuring) {
        // The cycles that end in the measured phase.
        acquire.push(Number(t1 - t0))
        count++
      }
      if (first) {
        warmed++
        first = false
      }
    }
  })
  // Until every loop has finished a cycle (with 10,000 paths one takes seconds), at least the
  // warm-up, at most 120 s.
  const warming = now()
  await sleepMs(Math.max(warmupS, 1) * 1000)
  while (warmed < n && seconds(now() - warming) < 120) await sleepMs(50)
  const cpu0 = process.cpuUsage()
  const started = now()
  measuring = true
  await sleepMs(measureS * 1000)
  measuring = false
  const elapsed = seconds(now() - started)
  const cpu = process.cpuUsage(cpu0)
  stop = true
  await Promise.all(loops)
  acquire.sort((a, b) => a - b)
  const figures = {
    cycles_per_s: count / elapsed,
    acquire_p50_us: percentileUs(acquire, 0.5),
    acquire_p99_us: percentileUs(acquire, 0.99),
    cpu_us_per_cycle: count ? (cpu.user + cpu.system) / count : NaN,
    peak_rss_mb: statusMb('VmHWM'),
    held_kb_per_lock: ((heldRss - before) * 1024) / n,
    kept_kb_per_lock: ((after - before) * 1024) / n,
  }
  log(`many_locks ${n}: ${figures.cycles_per_s.toFixed(1)} cycles/s`)
  return Object.fromEntries(Object.entries(figures).map(([k, v]) => [`many_${n}_${k}`, v]))
}

const client = await Client.connect(connect)
let manyPathsRate = NaN
if (selected.includes('many_paths')) {
  log(`many_paths: ${manyPaths} paths, a new Lock per cycle...`)
  manyPathsRate = await manyPathsCycles(client)
}
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
let scaled = {}
if (selected.includes('scale')) scaled = await scale(client) // long: only when named
if (selected.includes('many_locks')) {
  const counts = (process.env.BENCH_MANY_PATHS || '16,200,1000,10000').split(',').filter((n) => n.trim()).map(Number)
  for (const n of counts) {
    log(`many_locks: ${n} paths, an async function and a Lock each, one client...`)
    Object.assign(scaled, await manyLocks(client, n))
  }
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
    many_paths_cycles_per_s: round1(manyPathsRate),
    ...Object.fromEntries(Object.entries(scaled).map(([k, v]) => [k, typeof v === 'number' ? round1(v) : v])),
  }),
)
