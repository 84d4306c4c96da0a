// The limits that keep one client from harming a shared server (a 300,000-deep path once had
// the client create every parent until the server died), seen from Node: refused at once,
// naming the limit, before any traffic; and a timeout resolves null, which `await using` takes.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder } from './helpers.mjs'

test('input over the limits is refused at once, naming the limit', async () => {
  const client = await Client.connect(ZK)
  try {
    const started = Date.now()
    assert.throws(() => client.lock('/a'.repeat(300_000)), {
      code: codes.INVALID_ARGUMENT,
      message: /300000 segments deep, over zklock's limit of 64 segments/,
    })
    assert.ok(Date.now() - started < 1000, 'refused at once')
    const path = uniquePath('limits') // 2 deep
    assert.throws(() => client.lock(path + '/a'.repeat(63)), { code: codes.INVALID_ARGUMENT, message: /65 segments deep/ })
    assert.throws(() => client.semaphore(path + '/a'.repeat(63), { maxLeases: 2 }), { code: codes.INVALID_ARGUMENT, message: /65 segments deep/ })
    assert.throws(() => client.lock(path, { identifier: 'i'.repeat(1025) }), {
      code: codes.INVALID_ARGUMENT,
      message: /identifier of 1025 bytes, over zklock's limit of 1024 bytes/,
    })
    await assert.rejects(client.semaphore(path, { maxLeases: 2 ** 31 - 1 }).acquire({ leases: 1025 }), {
      code: codes.INVALID_ARGUMENT,
      message: /1025 leases asked for at once, over zklock's limit of 1024 leases/,
    })
    const members = Array.from({ length: 257 }, (_, i) => client.lock(`${path}/m${i}`))
    assert.throws(() => client.multiLock(members), { code: codes.INVALID_ARGUMENT, message: /multi-lock of 257 members/ })
    assert.deepEqual(await ephemeralsUnder(path), [])
    // At the limit: taken.
    const at = client.lock(path + '/a'.repeat(62))
    await at.withLock(async () => {})
  } finally {
    await client.close()
  }
})

// `await using` (which takes null, as it did not take false) is checked by the type test
// (test/types/program.ts): this Node may not parse it yet.
test('a timeout resolves null for a lock, a semaphore and a multi-lock', async () => {
  const [holder, other] = [await Client.connect(ZK), await Client.connect(ZK)]
  try {
    const path = uniquePath('null')
    const held = await holder.lock(path).acquire()
    const semaphore = holder.semaphore(`${path}-s`, { maxLeases: 1 })
    const lease = await semaphore.acquire()
    assert.equal(await other.lock(path).acquire({ timeoutMs: 0 }), null)
    assert.equal(await other.lock(path).acquire({ timeoutMs: 100 }), null)
    assert.equal(await other.semaphore(`${path}-s`, { maxLeases: 1 }).acquire({ timeoutMs: 0 }), null)
    assert.equal(await other.multiLock([other.lock(path)]).acquire({ timeoutMs: 50 }), null)
    await held.release()
    await lease.release()
    const taken = await other.lock(path).acquire({ timeoutMs: 5000 })
    assert.equal(taken.state, 'held')
    await taken[Symbol.asyncDispose]()
    assert.deepEqual(await ephemeralsUnder(path), [], 'released by its disposal')
  } finally {
    await holder.close()
    await other.close()
  }
})
