// Test support: the server under test, unique lock paths, an independent observer of the lock
// nodes, the fault proxy, and waiting on conditions with deadlines.
import net from 'node:net'
import { spawn } from 'node:child_process'
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
 */
export async function ephemeralsUnder(lockPath) {
  const [host, port] = ZK.split(',')[0].split('/')[0].split(':')
  const reply = await new Promise((resolve, reject) => {
    const socket = net.connect({ host, port: Number(port) }, () => socket.end('dump'))
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => (text += chunk))
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    socket.setTimeout(5000, () => socket.destroy(new Error('no reply to dump')))
  })
  if (!reply.includes('Sessions with Ephemerals')) throw new Error(`unexpected dump reply: ${reply}`)
  return reply
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith(`${lockPath}/`))
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

/** Resolves when the server lists exactly `count` lock nodes under `lockPath`. */
export function nodesBecome(lockPath, count, timeoutMs = 10000) {
  return waitFor(async () => (await ephemeralsUnder(lockPath)).length === count, {
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
