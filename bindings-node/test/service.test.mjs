// A long-running service's use of the binding (issue 47): many short-lived Lock objects, nested
// helpers, abandoned acquisitions, and shutdown.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, runScript } from './helpers.mjs'

let client
before(async () => {
  client = await Client.connect(ZK)
})
after(async () => {
  await client.close()
})

test('10,000 dropped Locks that each ran withLock once leave unrelated promises as fast as before', async () => {
  // In a fresh process, which used nothing of zklock before its first measurement. Each Lock had
  // an AsyncLocalStorage of its own, and Node kept every one that ran in a list that each new
  // promise walks: ~100x slower here after 10,000.
  const run = runScript('many-locks.mjs', [uniquePath('many-locks'), '10000', '50'], { timeoutMs: 110000 })
  const { code, stderr, lines } = await run.exited
  assert.equal(code, 0, stderr)
  const result = lines.find((line) => line.startsWith('RESULT '))
  assert.ok(result, `no result: ${lines.join('\n')}`)
  const { before, after } = JSON.parse(result.slice('RESULT '.length))
  assert.ok(before / after < 2, `awaits per ms: ${before.toFixed(0)} before, ${after.toFixed(0)} after`)
})

for (const [waiters, delayMs] of [[2000, 0], [2000, 2], [2000, 5], [2000, 10], [100, 5]]) {
  test(`close() not awaited, then process.exit(): the session still ends at exit (${waiters} queued, exit after ${delayMs} ms)`, async () => {
    const lockPath = uniquePath('close-then-exit')
    const run = runScript('close-then-exit.mjs', [lockPath, String(waiters), String(delayMs)], { timeoutMs: 60000 })
    const { code, stderr, lines } = await run.exited
    assert.equal(code, 0, stderr)
    assert.ok(lines.includes('QUEUED'), lines.join('\n'))
    // The session had a 30 s timeout: its nodes go this fast only because it was closed.
    await nodesBecome(lockPath, 0, 3000)
  })
}

test('a helper that locks its path, called inside itself, re-enters through its second Lock object', async () => {
  const lockPath = uniquePath('helper')
  // As a service writes it: a new Lock object at each call.
  const withPath = (fn) => client.lock(lockPath).withLock(fn, { timeoutMs: 5000 })
  const result = await withPath(async (outer) => {
    // Before, a new owner waiting behind the outer hold, for ever (here: ZKLOCK_TIMEOUT).
    return withPath(async (inner) => {
      assert.equal(inner.fencingToken, outer.fencingToken, 'the same hold, one level deeper')
      return 'inner ran'
    })
  })
  assert.equal(result, 'inner ran')
  await nodesBecome(lockPath, 0, 3000)
  // The read/write lock's sides too, through a second ReadWriteLock: the downgrade.
  const rw = () => client.readWriteLock(lockPath)
  await rw().write.withLock(() => rw().read.withLock(async () => {}, { timeoutMs: 5000 }))
})

test('a flow holding a path through a lock of another identifier is refused with ZKLOCK_DEADLOCK at once', async () => {
  const lockPath = uniquePath('other-identifier')
  const outer = client.lock(lockPath, { identifier: 'a' })
  await outer.withLock(async () => {
    const other = client.lock(lockPath, { identifier: 'b' })
    // Before, it queued behind its own node: ZKLOCK_TIMEOUT after 5 s here, for ever without it.
    await assert.rejects(other.withLock(async () => {}, { timeoutMs: 5000 }), { code: codes.DEADLOCK })
    await assert.rejects(other.acquire({ timeoutMs: 5000 }), { code: codes.DEADLOCK })
    assert.equal((await ephemeralsUnder(lockPath)).length, 1, 'nothing was queued')
    // Two readers of separate read/write locks hold together.
    const readers = [client.readWriteLock(`${lockPath}-rw`, { identifier: 'a' }), client.readWriteLock(`${lockPath}-rw`, { identifier: 'b' })]
    await readers[0].read.withLock(() => readers[1].read.withLock(async () => {}, { timeoutMs: 5000 }))
  })
  // Another flow (not holding) simply waits its turn: no refusal.
  const held = await client.lock(lockPath, { identifier: 'a' }).acquire()
  const waiting = client.lock(lockPath, { identifier: 'b' }).acquire()
  await nodesBecome(lockPath, 2)
  await held.release()
  await (await waiting).release()
})
