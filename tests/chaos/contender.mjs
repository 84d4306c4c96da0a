// Chaos soak contender in Node (the orchestrator's fixed contender protocol).
//
//   node contender.mjs --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS
//                      [--op-sleep-ms N] [--idle-ms N] [--sasl-digest USER:PASSWORD]
//
// --sasl-digest (the soak's servers require SASL): every connection authenticates with SASL
// DIGEST-MD5 as USER (the client's `sasl` option).
//
// One zklock client, one TCP connection to the fenced resource; loops until SIGTERM (then: close
// the client so its nodes go, exit 0). Exit 3 if the resource connection drops. Cancel is an
// AbortSignal; a loss is the hold's signal aborting (its reason a LockLostError).
//
// Downgrades: one write hold in 3 that is not pinned, after its writes, takes the read side in the
// write holder's flow (writeHold.run(() => rw.read.acquire())): a read node with the write node's
// sequence and the same token; then DOWNGRADE, the write side released, a READ or two, END.
import net from 'node:net'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'

import { Client } from '../../bindings-node/index.mjs'

const MUTEX_PATH = '/chaos/mutex'
const RW_PATH = '/chaos/rw'
const PINNED_OP_INTERVAL_MS = 100

const { values: args } = parseArgs({
  options: {
    zk: { type: 'string' },
    resource: { type: 'string' },
    name: { type: 'string' },
    seed: { type: 'string' },
    'session-timeout-ms': { type: 'string' },
    'curator-mutex-only': { type: 'boolean' },
    'op-sleep-ms': { type: 'string', default: '30' },
    'idle-ms': { type: 'string', default: '50' },
    'sasl-digest': { type: 'string' },
  },
})
for (const key of ['zk', 'resource', 'name', 'seed', 'session-timeout-ms']) {
  if (args[key] === undefined) {
    console.error(`contender-node: --${key} is required`)
    process.exit(2)
  }
}
const sessionTimeoutMs = Number(args['session-timeout-ms'])
let sasl
if (args['sasl-digest'] !== undefined) {
  const colon = args['sasl-digest'].indexOf(':')
  if (colon < 0) {
    console.error('contender-node: --sasl-digest wants USER:PASSWORD')
    process.exit(2)
  }
  const [username, password] = [args['sasl-digest'].slice(0, colon), args['sasl-digest'].slice(colon + 1)]
  sasl = { mechanism: 'DIGEST-MD5', username, password }
}
const opSleepMs = Number(args['op-sleep-ms']) // the sleep after an operation: uniform in [0, opSleepMs]
const idleMs = Number(args['idle-ms']) // the sleep between iterations: uniform in [0, idleMs]
for (const [key, value] of [['op-sleep-ms', opSleepMs], ['idle-ms', idleMs]]) {
  if (!Number.isInteger(value) || value < 0) {
    console.error(`contender-node: --${key} must be an integer >= 0`)
    process.exit(2)
  }
}

// splitmix64
const MASK = (1n << 64n) - 1n
let rngState = BigInt(args.seed) & MASK
function nextRandom() {
  rngState = (rngState + 0x9e3779b97f4a7c15n) & MASK
  let z = rngState
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK
  return z ^ (z >> 31n)
}
/** Uniform in [lo, hi]. */
const uniform = (lo, hi) => lo + Number(nextRandom() % BigInt(hi - lo + 1))

// ---------------------------------------------------------------------------------- resource

function gone(what) {
  console.error(`contender-node ${args.name}: resource connection ${what}`)
  process.exit(3)
}

const [host, port] = [args.resource.slice(0, args.resource.lastIndexOf(':')), args.resource.slice(args.resource.lastIndexOf(':') + 1)]
const socket = net.connect({ host, port: Number(port), noDelay: true })
let closing = false
let buffered = ''
const replyWaiters = []
socket.setEncoding('ascii')
socket.on('data', (chunk) => {
  buffered += chunk
  let at
  while ((at = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, at)
    buffered = buffered.slice(at + 1)
    const waiter = replyWaiters.shift()
    if (waiter) waiter(line)
  }
})
socket.on('error', (e) => {
  if (!closing) gone(`dropped (${e.message})`)
})
socket.on('close', () => {
  if (!closing) gone('closed')
})
await new Promise((resolve) => socket.once('connect', resolve))

// One request at a time: the LOST sender and the loop share the socket.
let queue = Promise.resolve()
function send(line, reply = true) {
  const turn = queue.then(
    () =>
      new Promise((resolve) => {
        if (reply) replyWaiters.push(resolve)
        socket.write(line + '\n')
        if (!reply) resolve(undefined)
      }),
  )
  queue = turn
  return turn
}

// ------------------------------------------------------------------------------------ holds

/** One hold's reporting state: LOST at most once, only after BEGIN, never after END. */
class HoldReport {
  constructor(path, mode) {
    this.path = path
    this.mode = mode
    this.token = 0n
    this.begun = false
    this.ended = false
    this.lostReason = null
    this.lostSent = false
  }
  lost(reason) {
    this.lostReason ??= reason
    this.report()
  }
  report() {
    if (this.lostReason === null || !this.begun || this.ended || this.lostSent) return
    this.lostSent = true // claimed synchronously: END checks it in the same turn
    send(`LOST ${this.path} ${this.token} ${this.lostReason}`)
  }
}

let stopping = false
let acquiring = null // the AbortController of the acquisition in progress
let wakeNap = () => {}
async function nap(ms) {
  if (stopping) return
  const controller = new AbortController()
  wakeNap = () => controller.abort()
  try {
    await sleep(ms, undefined, { signal: controller.signal })
  } catch {
    // woken by SIGTERM
  }
}
function onSignal() {
  stopping = true
  acquiring?.abort()
  wakeNap()
}
process.on('SIGTERM', onSignal)
process.on('SIGINT', onSignal)

async function iteration(client) {
  // 1. the target
  const pick = uniform(0, 99)
  const mode = pick < 50 ? 'x' : pick < 75 ? 'r' : 'w'
  const path = mode === 'x' ? MUTEX_PATH : RW_PATH
  let lock
  let rw = null
  try {
    if (mode === 'x') lock = client.lock(path)
    else {
      rw = client.readWriteLock(path)
      lock = mode === 'r' ? rw.read : rw.write
    }
  } catch (e) {
    send(`ERROR ${e.code ?? e.name}`, false)
    await nap(100)
    return
  }

  // 2-3. the wait
  const how = uniform(0, 99)
  let timeoutMs
  let cancelAfter = null
  if (how < 70) timeoutMs = uniform(200, 3000)
  else if (how < 85) cancelAfter = uniform(0, 1000)
  else timeoutMs = 0
  const controller = new AbortController()
  acquiring = controller
  const canceller = cancelAfter === null ? null : setTimeout(() => controller.abort(), cancelAfter)
  if (stopping) controller.abort()
  const started = performance.now()
  let hold = null
  let outcome
  try {
    hold = await lock.acquire({ timeoutMs, signal: controller.signal })
    outcome = hold ? 'held' : timeoutMs === 0 ? 'busy' : 'timeout'
  } catch (e) {
    outcome = e.name === 'AbortError' ? 'cancelled' : `error:${e.code ?? e.name}`
  }
  acquiring = null
  if (canceller) clearTimeout(canceller)
  const waited = Math.round(performance.now() - started)
  send(`WAIT ${path} ${mode} ${waited} ${outcome}`, false)

  if (hold) {
    // 4. the hold
    const report = new HoldReport(path, mode)
    report.token = hold.fencingToken
    const onLost = () => report.lost(hold.signal.reason?.lostReason ?? 'lost')
    if (hold.signal.aborted) report.lostReason = hold.signal.reason?.lostReason ?? 'lost'
    else hold.signal.addEventListener('abort', onLost, { once: true })
    const reply = await send(`BEGIN ${path} ${mode} ${report.token} node ${args.name}`)
    const begunAt = performance.now()
    report.begun = true
    report.report() // lost before BEGIN was acknowledged
    const verb = mode === 'r' ? 'READ' : 'WRITE'
    const pin = /^OK PIN (\d+)$/.exec(reply)
    const downgrade = uniform(0, 2) === 0 && mode === 'w' && !(pin && Number(pin[1]) > 0)
    if (pin && Number(pin[1]) > 0) {
      // Pinned: hold for the given ms from the reply, one operation every 100 ms (the orchestrator
      // stalls or cuts this contender meanwhile). A loss is reported by the signal's listener even
      // while this sleeps. State changes go to stderr, to show a short stall survived.
      const until = begunAt + Number(pin[1])
      let lastState = 'held'
      for (let nextOp = performance.now(); !stopping && performance.now() < until; ) {
        const state = hold.state
        if (state === 'lost') report.lost('state_lost')
        if (report.lostReason !== null) break
        if (state !== lastState) {
          console.error(`contender-node ${args.name}: pinned hold ${path} ${report.token}: ${state}`)
          lastState = state
        }
        await send(`${verb} ${path} ${report.token}`)
        nextOp += PINNED_OP_INTERVAL_MS
        await nap(Math.max(0, Math.min(nextOp, until) - performance.now()))
      }
    } else {
      const ops = uniform(1, 3)
      for (let i = 0; i < ops && !stopping; i++) {
        if (hold.state === 'lost') report.lost('state_lost')
        if (report.lostReason !== null) break
        await send(`${verb} ${path} ${report.token}`)
        await nap(uniform(0, opSleepMs))
      }
    }
    if (downgrade && report.lostReason === null && !stopping) {
      hold = await downgradeHold(rw, hold, report, onLost)
    }
    if (hold.state === 'lost') report.lost('state_lost')
    if (report.lostReason === null) {
      report.ended = true // set before the await: a later loss sends no LOST
      await send(`END ${path} ${report.token}`)
    }
    hold.signal.removeEventListener('abort', onLost)
    if (hold.onLost) hold.signal.removeEventListener('abort', hold.onLost)
    try {
      await hold.release()
    } catch (e) {
      // ZKLOCK_LOCK_LOST is expected once lost; END (if sent) came first, nothing more to report
      if (e.code !== 'ZKLOCK_LOCK_LOST' && report.lostReason === null) {
        send(`ERROR ${e.code ?? e.name}`, false)
        await nap(100)
      }
    }
  } else if (outcome.startsWith('error:')) {
    await nap(100)
  }
  // 6.
  await nap(uniform(0, idleMs))
}

// zklock's downgrade of a write hold: the read side in the write holder's flow, DOWNGRADE, the
// write side released, a READ or two. Returns the hold still held (the read, or the write if the
// read could not be had).
async function downgradeHold(rw, write, report, onWriteLost) {
  let read
  try {
    read = await write.run(() => rw.read.acquire({ timeoutMs: 3000 }))
  } catch (e) {
    send(`ERROR downgrade:${e.code ?? e.name}`, false)
    return write
  }
  if (!read) {
    send('ERROR downgrade:timeout', false)
    return write
  }
  read.onLost = () => report.lost(read.signal.reason?.lostReason ?? 'lost')
  if (read.signal.aborted) report.lost(read.signal.reason?.lostReason ?? 'lost')
  else read.signal.addEventListener('abort', read.onLost, { once: true })
  if (read.fencingToken !== report.token) send(`ERROR downgrade-token:${read.fencingToken}!=${report.token}`, false)
  if (write.state === 'lost') report.lost('state_lost')
  if (report.lostReason === null) await send(`DOWNGRADE ${report.path} ${report.token}`)
  write.signal.removeEventListener('abort', onWriteLost)
  try {
    await write.release()
  } catch (e) {
    if (report.lostReason === null) send(`ERROR release-write:${e.code ?? e.name}`, false)
  }
  const ops = uniform(1, 2)
  for (let i = 0; i < ops && !stopping; i++) {
    if (read.state === 'lost') report.lost('state_lost')
    if (report.lostReason !== null) break
    await send(`READ ${report.path} ${report.token}`)
    await nap(uniform(0, opSleepMs))
  }
  return read
}

let client = null
while (client === null && !stopping) {
  try {
    client = await Client.connect(args.zk, { sessionTimeoutMs, connectTimeoutMs: sessionTimeoutMs, sasl })
  } catch (e) {
    if (e.code === 'ZKLOCK_INVALID_ARGUMENT') throw e
    send(`ERROR ${e.code ?? e.name}`, false)
    await nap(100)
  }
}
if (client !== null) {
  while (!stopping) await iteration(client)
  // Ends the session: the server deletes this client's nodes at once.
  await client.close()
}
await queue
closing = true
socket.end()
process.exit(0)
