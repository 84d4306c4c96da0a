// Test support: the server under test, unique lock paths, an independent observer of the lock
// nodes, the fault proxy, and waiting on conditions with deadlines.
import assert from 'node:assert/strict'
import net from 'node:net'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

export const ZK = process.env.ZK_CONNECT
if (!ZK) throw new Error('ZK_CONNECT must name the ZooKeeper server (scripts/test-node starts one)')

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

let counter = 0
/** A lock path no other test (or earlier run) uses. */
export function uniquePath(name) {
  return `/zklock-node-test/${process.pid}-${Date.now().toString(36)}-${++counter}-${name}`
}

/**
 * The ephemeral nodes under `lockPath`, as the server itself reports them through the `dump`
 * four-letter word: an observer that shares no code with zklock and no session with the client
 * under test. The order of the list is the server's (unspecified): compare counts or sort.
 * `server` is a connect string (default: the server under test); its first host is asked.
 */
export async function ephemeralsUnder(lockPath, server = ZK) {
  const reply = await fourLetterWord(server, 'dump')
  if (!reply.includes('Sessions with Ephemerals')) throw new Error(`unexpected dump reply: ${reply}`)
  return reply
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith(`${lockPath}/`))
}

/**
 * Whether the server (default: the one under test) lists the node at `nodePath` as watched by
 * session `sessionId` (a bigint, as a Participant's), through the `wchp` four-letter word: a
 * waiter's sign that it has decided to wait.
 */
export async function watchedBy(nodePath, sessionId, server = ZK) {
  const session = `0x${BigInt.asUintN(64, sessionId).toString(16)}`
  let watched = null
  // A watched path's line, then a tab-indented line for each session watching it.
  for (const line of (await fourLetterWord(server, 'wchp')).split('\n')) {
    if (!line.startsWith('\t')) watched = line.trim()
    else if (watched === nodePath && line.trim() === session) return true
  }
  return false
}

/** The reply of the first host of `server` to a four-letter word. */
function fourLetterWord(server, word) {
  const [host, port] = server.split(',')[0].split('/')[0].split(':')
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port: Number(port) }, () => socket.end(word))
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => (text += chunk))
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    socket.setTimeout(5000, () => socket.destroy(new Error(`no reply to ${word}`)))
  })
}

/** Waits until `condition()` (sync or async) is truthy; fails after `timeoutMs`. */
export async function waitFor(condition, { timeoutMs = 10000, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await condition()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * `first` holds the lock at `lockPath`, `second` finds it held, queues (the server's `dump` shows
 * both nodes) and gets it when `first` releases, then releases it. `server`: as ephemeralsUnder's.
 */
export async function handOver(first, second, lockPath, server = ZK) {
  const hold = await first.lock(lockPath).acquire()
  assert.equal((await ephemeralsUnder(lockPath, server)).length, 1)
  assert.equal(await second.lock(lockPath).acquire({ timeoutMs: 0 }), null, 'held by the first')
  const waiting = second.lock(lockPath).acquire({ timeoutMs: 10000 })
  await waitFor(async () => (await ephemeralsUnder(lockPath, server)).length === 2, { what: 'the second queued' })
  await hold.release()
  const seconds = await waiting
  assert.equal(seconds.state, 'held')
  await seconds.release()
}

/** Settles as `promise` does, or rejects naming `what` if it has not settled within `timeoutMs`. */
export async function within(promise, timeoutMs, what) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Resolves when the server (default: the one under test) lists exactly `count` lock nodes under `lockPath`. */
export function nodesBecome(lockPath, count, timeoutMs = 10000, server = ZK) {
  return waitFor(async () => (await ephemeralsUnder(lockPath, server)).length === count, {
    timeoutMs,
    what: `${count} lock node(s) under ${lockPath}`,
  })
}

/** A promise with its resolve function, for handing control between flows. */
export function deferred() {
  let resolve
  const promise = new Promise((r) => (resolve = r))
  return { promise, resolve }
}

/** The fault proxy (zklock-proxy) in front of the server: `stall`, `pass`, `cut`. */
export async function startProxy() {
  const upstream = ZK.split(',')[0].split('/')[0]
  const child = spawn(path.join(REPO, 'target/debug/zklock-proxy'), [upstream], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const { value, done } = await lines.next()
    if (done) throw new Error('zklock-proxy exited')
    return value
  }
  const first = await next()
  const match = /^LISTEN (\S+)$/.exec(first)
  if (!match) throw new Error(`unexpected zklock-proxy output: ${first}`)
  return {
    address: match[1],
    async command(name) {
      child.stdin.write(`${name}\n`)
      const reply = await next()
      if (reply !== `OK ${name}`) throw new Error(`zklock-proxy answered ${reply} to ${name}`)
    },
    stop() {
      child.stdin.end()
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)))
    },
  }
}

/** Runs a Node script (a file in test/fixtures) and collects its exit and output. */
export function runScript(file, args, { timeoutMs = 30000, onLine } = {}) {
  const child = spawn(process.execPath, [path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', file), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: process.env,
  })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const lines = []
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(line)
    onLine?.(line)
  })
  const exited = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${file} did not exit within ${timeoutMs} ms; stderr: ${stderr}`))
    }, timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stderr, lines })
    })
  })
  return { child, exited, lines }
}

/**
 * A private standalone server whose `znodePath` exists with child version `cversion` (a snapshot
 * written by `scripts/zk seed-seq`), so its next sequential child is numbered `cversion`: how a
 * test reaches ZooKeeper's 32-bit sequence limit without 2^31 creates. `stop()` kills it and
 * removes its directory.
 */
export async function startSeededServer(znodePath, cversion) {
  const zk = path.join(REPO, 'scripts/zk')
  const dir = mkdtempSync(path.join(tmpdir(), 'zklock-node-seeded-'))
  const run = (args) => execFileSync(zk, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  const port = await freePort()
  run(['config', dir, '1', String(port)])
  run(['seed-seq', path.join(dir, 'data'), znodePath, String(cversion)])
  // exec-server execs the JVM: the child is the server. The watchdog kills it if this process dies.
  const server = spawn(zk, ['exec-server', dir], {
    stdio: 'ignore',
    env: { ...process.env, ZK_JVM_FLAGS: '-Dzookeeper.digest.enabled=false', ZK_PARENT_PID: String(process.pid) },
  })
  const exited = new Promise((resolve) => server.once('exit', resolve))
  const connect = `127.0.0.1:${port}`
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitFor(
      async () => {
        if (server.exitCode !== null) throw new Error(`the seeded server exited: ${readLog(dir)}`)
        return (await fourLetterWord(connect, 'srvr').catch(() => '')).includes('Mode: ')
      },
      { timeoutMs: 60000, what: 'the seeded server to serve' },
    )
  } catch (error) {
    await stop()
    throw error
  }
  return { connect, stop }
}

function readLog(dir) {
  try {
    return readFileSync(path.join(dir, 'server.log'), 'utf8')
  } catch {
    return '(no server.log)'
  }
}

/** A loopback port no socket is bound to right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
    server.on('error', reject)
  })
}

/**
 * A bare ZooKeeper client of its own (the wire protocol, a few requests), sharing no code with
 * zklock: it changes what a Curator process or an operator would (a SharedCount's value, a node
 * deleted from under its holder) and reads a node's ACL as the server has it.
 * `setData(path, bytes)`, `delete(path)`, `getACL(path)` ([{ perms, scheme, id }]), `close()`;
 * each rejects with the server's error code.
 */
export async function rawZooKeeper(server = ZK) {
  const [hostPort, chroot] = server.split(',')[0].split('/')
  if (chroot) throw new Error('rawZooKeeper: no chroot')
  const [host, port] = hostPort.split(':')
  const socket = net.connect({ host, port: Number(port) })
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  let buffered = Buffer.alloc(0)
  let waiting = null
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk])
    waiting?.()
  })
  // The next length-prefixed frame from the server.
  const frame = async () => {
    while (buffered.length < 4 || buffered.length < 4 + buffered.readInt32BE(0)) {
      await new Promise((resolve) => (waiting = resolve))
    }
    const length = buffered.readInt32BE(0)
    const body = buffered.subarray(4, 4 + length)
    buffered = buffered.subarray(4 + length)
    return body
  }
  const int = (value) => {
    const bytes = Buffer.alloc(4)
    bytes.writeInt32BE(value)
    return bytes
  }
  const long = () => Buffer.alloc(8) // 0
  const bytes = (data) => Buffer.concat([int(data.length), data])
  const send = (...parts) => {
    const body = Buffer.concat(parts)
    socket.write(Buffer.concat([int(body.length), body]))
  }
  // ConnectRequest: protocol version, last zxid seen, timeout, session id, password, read-only.
  send(int(0), long(), int(10000), long(), bytes(Buffer.alloc(16)), Buffer.from([0]))
  await frame()
  let xid = 0
  const request = async (type, ...body) => {
    send(int(++xid), int(type), ...body)
    const reply = await frame()
    const err = reply.readInt32BE(12)
    if (err !== 0) throw new Error(`ZooKeeper error ${err} for request type ${type}`)
    return reply
  }
  const path = (text) => bytes(Buffer.from(text, 'utf8'))
  return {
    setData: (nodePath, data) => request(5, path(nodePath), bytes(Buffer.from(data)), int(-1)),
    delete: (nodePath) => request(2, path(nodePath), int(-1)),
    async getACL(nodePath) {
      // GetACLResponse, after the 16-byte reply header: a vector of (perms, scheme, id), a stat.
      const reply = await request(6, path(nodePath))
      let at = 16
      const next = () => (at += 4) && reply.readInt32BE(at - 4)
      const string = () => {
        const length = next()
        return reply.toString('utf8', at, (at += length))
      }
      return Array.from({ length: next() }, () => ({ perms: next(), scheme: string(), id: string() }))
    },
    async close() {
      await request(-11)
      socket.destroy()
    },
  }
}
