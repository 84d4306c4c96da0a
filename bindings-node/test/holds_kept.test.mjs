// A hold stays held when its Hold object is collected: a program may rely on a hold without
// keeping the object (a leader that holds until it exits, watching only `hold.signal`), and a
// Hold is one level of an owner's hold, not the level a collector would give back. (Giving
// collected Holds back, tried for abandoned acquisitions, let a second holder in.)
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import v8 from 'node:v8'
import vm from 'node:vm'

import { Client } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome } from './helpers.mjs'

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

let client
before(async () => {
  client = await Client.connect(ZK)
})
after(async () => {
  await client.close()
})

async function collect() {
  for (let i = 0; i < 10; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// Whether another client can take the lock right now (it gives it back at once if so).
async function takenByAnother(lockPath) {
  const other = await Client.connect(ZK)
  try {
    const got = await other.lock(lockPath).acquire({ timeoutMs: 1000 })
    if (got) await got.release()
    return Boolean(got)
  } finally {
    await other.close()
  }
}

test('a leader that keeps only its hold\'s signal and fencing token keeps the lock when the Hold object is collected', async () => {
  const lockPath = uniquePath('leader-signal')
  const lock = client.lock(lockPath)
  // A leader: holds until the process ends (close() gives it back); watches for loss with the
  // signal, passes the token to the resource. The Hold object itself is not kept.
  const { signal, token } = await (async () => {
    const hold = await lock.acquire()
    return { signal: hold.signal, token: hold.fencingToken }
  })()
  assert.equal(typeof token, 'bigint')
  await collect()
  const nodes = (await ephemeralsUnder(lockPath)).length
  const stolen = await takenByAnother(lockPath)
  // The program was never told: the signal aborts only for a loss, never for a release.
  assert.equal(signal.aborted, false)
  assert.equal(nodes, 1, 'the leader\'s lock node is still there')
  assert.equal(stolen, false, 'another client took the lock while this one still leads and its signal never aborted')
})

test('a nested Hold the program keeps stays held when the outer Hold, whose level was released through the Lock, is collected', async () => {
  const lockPath = uniquePath('nested-kept')
  const lock = client.lock(lockPath)
  let inner
  await (await lock.acquire()).run(async () => {
    inner = await lock.acquire() // a second level, re-entered
    await lock.release() // one level released by the flow, as the README allows
  })
  // One level is left, and `inner` stands for it: the program relies on it until inner.release().
  assert.equal(inner.state, 'held')
  await collect()
  const state = inner.state
  const stolen = await takenByAnother(lockPath)
  await inner.release().catch(() => {})
  assert.equal(state, 'held', 'the kept Hold is still held')
  assert.equal(stolen, false, 'another client took the lock while a kept Hold stood for it')
})

// The documented way to bound a wait (not an acquire() raced against a timer, whose later grant
// nobody would receive): timeoutMs or a signal. Either leaves no node and nothing held when the
// lock comes free later.
test('a wait bounded by timeoutMs or a signal leaves nothing held when the lock comes free later', async () => {
  const lockPath = uniquePath('bounded-wait')
  const other = await Client.connect(ZK)
  try {
    const held = await other.lock(lockPath).acquire()
    await assert.rejects(client.lock(lockPath).acquire({ signal: AbortSignal.timeout(200) }), (err) => err.name === 'AbortError')
    assert.equal(await client.lock(lockPath).acquire({ timeoutMs: 200 }), null)
    assert.equal((await ephemeralsUnder(lockPath)).length, 1, "only the holder's node is left")
    await held.release()
    await nodesBecome(lockPath, 0)
    assert.equal(await takenByAnother(lockPath), true, 'the lock is free: nobody got a grant')
  } finally {
    await other.close()
  }
})
