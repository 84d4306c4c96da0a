// The API's surface: the declarations compile with tsc --strict on their own, internals are out
// of reach, errors point at the caller's line, a shared AbortSignal draws no warning, owner
// labels name the worker thread, and a lost hold is not re-entered or released as if held.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { Worker } from 'node:worker_threads'

import { Client, Lock, ReadWriteLock, Hold, codes } from 'zklock'
import { ZK, REPO, uniquePath, ephemeralsUnder, nodesBecome } from './helpers.mjs'

const PKG = path.join(REPO, 'bindings-node')

test('index.d.ts compiles under tsc --strict with no lib or types settings of the program', () => {
  const tsc = createRequire(path.join(PKG, 'package.json')).resolve('typescript/bin/tsc')
  // Throws (with tsc's diagnostics) on any error.
  execFileSync(process.execPath, [tsc, '-p', path.join(PKG, 'test/types/tsconfig.json')], { encoding: 'utf8' })
})

test('no undeclared member is reachable on Client, Lock, ReadWriteLock or Hold', () => {
  const declared = {
    Client: ['constructor', 'state', 'onStateChange', 'lock', 'readWriteLock', 'close'],
    Lock: ['constructor', 'path', 'mode', 'isHeld', 'state', 'contenders', 'holder', 'holders', 'acquire', 'withLock', 'release'],
    ReadWriteLock: ['constructor', 'path', 'read', 'write', 'contenders', 'holders'],
    Hold: ['constructor', 'fencingToken', 'sequence', 'state', 'signal', 'release', 'run'],
  }
  for (const [name, cls] of Object.entries({ Client, Lock, ReadWriteLock, Hold })) {
    const members = Object.getOwnPropertyNames(cls.prototype).sort()
    assert.deepEqual(members, [...declared[name]].sort(), name)
    assert.deepEqual(Object.getOwnPropertySymbols(cls.prototype).map(String), name === 'Hold' ? [String(Symbol.asyncDispose)] : [])
  }
})

test("a native rejection's stack shows the caller's line", async () => {
  const closed = await Client.connect(ZK)
  await closed.close()
  const lock = closed.lock(uniquePath('closed'))
  for (const call of [() => lock.acquire(), () => lock.withLock(async () => {}), () => lock.contenders()]) {
    const rejected = await call().catch((error) => error)
    assert.equal(rejected.code, codes.CLOSED)
    assert.match(rejected.stack, /api\.test\.mjs/, rejected.stack)
  }
})

test('NOT_OWNER from the core names the owner by its label, not an internal id', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('label'))
    const hold = await lock.acquire()
    await hold.release() // the node goes; the flow of hold.run is its owner still
    const err = await hold.run(() => lock.release()).catch((error) => error)
    assert.equal(err.code, codes.NOT_OWNER, String(err))
    assert.match(err.message, /owner async-flow:\d+@thread:0 does not hold/, err.message)
  } finally {
    await client.close()
  }
})

test('twenty acquisitions sharing one AbortSignal draw no warning, and all abort', async () => {
  const client = await Client.connect(ZK)
  const other = await Client.connect(ZK)
  const warnings = []
  const onWarning = (warning) => warnings.push(warning)
  process.on('warning', onWarning)
  try {
    const path = uniquePath('shared-signal')
    const held = await other.lock(path).acquire()
    const controller = new AbortController()
    const lock = client.lock(path)
    const waiting = Array.from({ length: 20 }, () => lock.acquire({ signal: controller.signal }))
    await nodesBecome(path, 21)
    controller.abort()
    const outcomes = await Promise.allSettled(waiting)
    assert.ok(outcomes.every((o) => o.status === 'rejected' && o.reason.name === 'AbortError'))
    await nodesBecome(path, 1)
    await held.release()
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(warnings.map(String), [])
  } finally {
    process.off('warning', onWarning)
    await client.close()
    await other.close()
  }
})

test('owner labels name the worker thread', async () => {
  const path = uniquePath('worker')
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads')
     const { Client } = require(workerData.pkg)
     ;(async () => {
       const client = await Client.connect(workerData.zk)
       const lock = client.lock(workerData.path)
       const hold = await lock.acquire()
       const holder = await lock.holder()
       await hold.release()
       await client.close()
       parentPort.postMessage(holder.identity.owner)
     })()`,
    { eval: true, workerData: { pkg: PKG, zk: ZK, path } },
  )
  const workerThreadId = worker.threadId // read now: it becomes -1 once the worker has exited
  const [label] = await new Promise((resolve, reject) => {
    worker.once('message', (message) => resolve([message]))
    worker.once('error', reject)
  })
  assert.match(label, new RegExp(`^async-flow:\\d+@thread:${workerThreadId}$`))
  await worker.terminate()
  assert.deepEqual(await ephemeralsUnder(path), [])
})

test('inside a lost hold, a nested withLock and a nested release reject with ZKLOCK_LOCK_LOST', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('lost-nested'))
    const outcome = await lock.withLock(async () => {
      const inner = await lock.acquire()
      await client.close() // the hold is lost
      assert.equal(lock.isHeld, false)
      assert.equal(lock.state, 'lost')
      const nested = await lock.withLock(async () => 'ran').catch((error) => error)
      const released = await inner.release().catch((error) => error)
      return { nested, released }
    }).catch((error) => ({ outer: error }))
    // The outer withLock's own release reports the loss, so withLock rejects with it...
    assert.equal(outcome.outer?.code, codes.LOCK_LOST, String(outcome.outer))
    // ...after the nested calls inside did too (checked through what fn returned, kept below).
  } finally {
    await client.close()
  }
})

test('inside a lost hold, the nested calls reject with ZKLOCK_LOCK_LOST', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('lost-nested-calls'))
    let seen
    await lock.withLock(async () => {
      const inner = await lock.acquire()
      await client.close()
      const nested = await lock.withLock(async () => 'ran').catch((error) => error)
      const released = await inner.release().catch((error) => error)
      seen = { nested: nested.code, released: released.code }
    }).catch(() => {})
    assert.deepEqual(seen, { nested: codes.LOCK_LOST, released: codes.LOCK_LOST })
  } finally {
    await client.close()
  }
})
