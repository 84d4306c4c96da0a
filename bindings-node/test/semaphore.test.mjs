// The semaphore and the multi-lock (issue 26) through the Node binding, against the real server:
// max never exceeded across processes, FIFO, n leases all or nothing, lost leases and members,
// a shared count changed at run time, multi-locks in both orders without deadlock, bad input.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { Client, Semaphore, Leases, MultiLock, MultiHold, AbortError, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, waitFor, startProxy, runScript, within, rawZooKeeper } from './helpers.mjs'

let client, observer
before(async () => {
  ;[client, observer] = await Promise.all([Client.connect(ZK), Client.connect(ZK)])
})
after(async () => {
  await Promise.all([client.close(), observer.close()])
})

/** The semaphore's nodes the server lists: [lease nodes, mutex nodes]. */
async function parts(semPath) {
  const nodes = await ephemeralsUnder(semPath)
  return [nodes.filter((n) => n.startsWith(`${semPath}/leases/`)).length, nodes.filter((n) => n.startsWith(`${semPath}/locks/`)).length]
}

function partsBecome(semPath, leases, queued) {
  return waitFor(async () => {
    const [l, q] = await parts(semPath)
    return l === leases && q === queued
  }, { what: `${leases} lease node(s) and ${queued} mutex node(s) under ${semPath}` })
}

test('withLease holds leases with fencing tokens and releases them; participants; max 1 is not reentrant', async () => {
  const semPath = uniquePath('sem-basic')
  const semaphore = client.semaphore(semPath, { maxLeases: 3, identifier: 'basic' })
  assert.ok(semaphore instanceof Semaphore)
  assert.equal(semaphore.path, semPath)
  assert.equal(await semaphore.currentMaxLeases(), 3)
  const result = await semaphore.withLease(
    async (leases) => {
      assert.ok(leases instanceof Leases)
      assert.equal(leases.count, 2)
      assert.equal(leases.state, 'held')
      assert.equal(leases.signal.aborted, false)
      const [first, second] = leases.fencingTokens
      assert.equal(typeof first, 'bigint')
      assert.ok(second > first, 'tokens rise in the order the nodes were made')
      assert.match(leases.nodes[0], new RegExp(`^${semPath}/leases/_c_[0-9a-f-]{36}-lease-\\d{10}$`))
      const seen = await observer.semaphore(semPath, { maxLeases: 3 }).participants()
      assert.equal(seen.holders.length, 2)
      assert.equal(seen.waiting.length, 0)
      assert.equal(seen.maxLeases, 3)
      assert.equal(seen.holders[0].identity.identifier, 'basic')
      assert.equal(seen.holders[0].identity.lang, 'node')
      return 'done'
    },
    { leases: 2 },
  )
  assert.equal(result, 'done')
  assert.deepEqual(await parts(semPath), [0, 0])

  // Max 1: Curator's InterProcessSemaphoreMutex. The same flow asking again waits like anyone.
  const mutex = client.semaphore(uniquePath('sem-mutex'), { maxLeases: 1 })
  const held = await mutex.acquire()
  assert.equal(await mutex.acquire({ timeoutMs: 0 }), null, 'not reentrant')
  const leases = await held.release().then(() => mutex.acquire({ timeoutMs: 5000 }))
  await assert.rejects(held.release(), { code: codes.NOT_OWNER })
  // Released leases' tokens must not pass for a holder's.
  assert.throws(() => held.fencingTokens, { code: codes.NOT_OWNER })
  await leases.release()
})

test('never more than max leases at once under load from four processes, and max is reached', async () => {
  const MAX = 3
  const semPath = uniquePath('sem-load')
  const slots = fs.mkdtempSync(path.join(os.tmpdir(), 'zklock-node-sem-'))
  try {
    // The gate holds every lease until the four processes queue, so that they contend together
    // however slowly each starts.
    const gate = await client.semaphore(semPath, { maxLeases: MAX }).acquire({ leases: MAX })
    const runs = [0, 1, 2, 3].map((i) => runScript('sem-holder.mjs', [semPath, String(MAX), slots, '4', String(i)], { timeoutMs: 60000 }))
    await waitFor(async () => (await parts(semPath))[1] === 4, { timeoutMs: 30000, what: 'the four processes queued' })
    await gate.release()
    const results = await Promise.all(runs.map((run) => run.exited))
    let most = 0
    for (const { code, stderr, lines } of results) {
      assert.equal(code, 0, `${lines.join('\n')}\n${stderr}`)
      assert.equal(lines.at(-1), 'DONE')
      for (const line of lines.filter((l) => l.startsWith('HELD '))) most = Math.max(most, Number(line.slice(5)))
    }
    assert.equal(most, MAX, 'the leases were shared up to max at once')
    assert.deepEqual(await parts(semPath), [0, 0], 'nothing left')
  } finally {
    fs.rmSync(slots, { recursive: true, force: true })
  }
})

test('acquirers are served first come, first served: a later one that fits does not pass an earlier one', async () => {
  const semPath = uniquePath('sem-fifo')
  const [a, b, c] = await Promise.all([Client.connect(ZK), Client.connect(ZK), Client.connect(ZK)])
  try {
    const holder = client.semaphore(semPath, { maxLeases: 3 })
    const held = [await holder.acquire(), await holder.acquire(), await holder.acquire()]
    const order = []
    const take = (who, semClient, leases) =>
      semClient.semaphore(semPath, { maxLeases: 3 }).acquire({ leases }).then((got) => {
        order.push(who)
        return got
      })
    const aLeases = take('a', a, 2)
    await partsBecome(semPath, 5, 1)
    const bLeases = take('b', b, 1)
    await partsBecome(semPath, 5, 2)
    const cLeases = take('c', c, 1)
    await partsBecome(semPath, 5, 3)

    await held[0].release()
    // Room for b, none for a: a waits with its two nodes, b and c behind it at the mutex.
    await partsBecome(semPath, 4, 3)
    const seen = await holder.participants()
    assert.equal(seen.waiting.length, 2, 'a waits with its two lease nodes')
    assert.equal(seen.queue.length, 3)
    assert.deepEqual(order, [])

    await held[1].release()
    const gotA = await aLeases
    await held[2].release()
    const gotB = await bLeases
    await gotB.release()
    const gotC = await cLeases
    assert.deepEqual(order, ['a', 'b', 'c'])
    await Promise.all([gotA.release(), gotC.release()])
    await partsBecome(semPath, 0, 0)
  } finally {
    await Promise.all([a.close(), b.close(), c.close()])
  }
})

test('n leases are all or nothing: a timeout, a try and an abort leave no lease node and no mutex node', async () => {
  const semPath = uniquePath('sem-n')
  const mine = client.semaphore(semPath, { maxLeases: 3 })
  const theirs = observer.semaphore(semPath, { maxLeases: 3 })
  const two = await mine.acquire({ leases: 2 })

  const started = Date.now()
  assert.equal(await theirs.acquire({ leases: 2, timeoutMs: 400 }), null)
  assert.ok(Date.now() - started < 3000, 'one deadline for the mutex and both leases')
  assert.deepEqual(await parts(semPath), [2, 0], 'only the holder’s leases')
  assert.equal(await theirs.acquire({ leases: 2, timeoutMs: 0 }), null)
  assert.deepEqual(await parts(semPath), [2, 0])
  await assert.rejects(theirs.withLease(() => {}, { leases: 2, timeoutMs: 200 }), { code: codes.TIMEOUT, path: semPath })
  assert.deepEqual(await parts(semPath), [2, 0])

  const controller = new AbortController()
  const aborted = theirs.acquire({ leases: 2, signal: controller.signal })
  await partsBecome(semPath, 4, 1)
  controller.abort()
  await assert.rejects(aborted, (error) => error instanceof AbortError)
  assert.deepEqual(await parts(semPath), [2, 0], 'removed before it rejected')

  const one = await theirs.acquire({ leases: 1, timeoutMs: 0 })
  assert.equal(one.count, 1)
  await Promise.all([one.release(), two.release()])
  await partsBecome(semPath, 0, 0)
})

test('a lease and a multi-lock are lost on session expiry; a member deleted from under its holder is named', async () => {
  const proxy = await startProxy()
  const stalled = await Client.connect(proxy.address, { sessionTimeoutMs: 2000 })
  const raw = await rawZooKeeper()
  try {
    const semPath = uniquePath('sem-lost')
    const leases = await stalled.semaphore(semPath, { maxLeases: 2 }).acquire({ leases: 2 })
    const multi = stalled.multiLock([stalled.lock(uniquePath('multi-lost')), { semaphore: stalled.semaphore(uniquePath('multi-lost-sem'), { maxLeases: 1 }) }])
    const multiHold = await multi.acquire()
    assert.ok(multiHold instanceof MultiHold)
    const waiting = observer.semaphore(semPath, { maxLeases: 2 }).acquire({ leases: 2 })
    await partsBecome(semPath, 4, 1)
    const signal = leases.signal
    const multiSignal = multiHold.signal
    const lost = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    const multiLost = new Promise((resolve) => multiSignal.addEventListener('abort', resolve, { once: true }))
    await proxy.command('stall')
    await within(Promise.all([lost, multiLost]), 15000, 'the losses')
    assert.equal(signal.reason.code, codes.LOCK_LOST)
    assert.ok(['sessionExpired', 'disconnectedTooLong'].includes(signal.reason.lostReason), signal.reason.lostReason)
    assert.equal(leases.state, 'lost')
    assert.throws(() => leases.fencingTokens, { code: codes.LOCK_LOST })
    assert.equal(multiSignal.reason.code, codes.LOCK_LOST)
    assert.equal(multiHold.state, 'lost')
    // Every member went with the session: the signal names the first loss told, lostMember the
    // first member in canonical order.
    assert.ok(multi.members.some((m) => m.path === multiSignal.reason.member.path && m.kind === multiSignal.reason.member.kind))
    assert.deepEqual(multiHold.lostMember.path, multi.members[0].path)
    // The room goes to the waiter once the server expires the session.
    const next = await within(waiting, 15000, 'the waiter, let in')
    assert.equal(next.count, 2)
    await proxy.command('pass')
    await assert.rejects(leases.release(), { code: codes.LOCK_LOST })
    await assert.rejects(multiHold.release(), { code: codes.LOCK_LOST })
    // Released, as in every language, once the release reported the loss.
    assert.equal(leases.state, 'released')
    assert.equal(multiHold.state, 'released')
    assert.equal(multiHold.lostMember, null)
    await next.release()

    // A member's node deleted by someone else: the signal and lostMember say which member.
    const base = uniquePath('multi-deleted')
    const [first, second] = [`${base}/a`, `${base}/b`]
    const held = await client.multiLock([client.lock(second), client.lock(first)]).acquire()
    assert.deepEqual(held.fencingTokens.map((member) => [member.path, member.kind, member.tokens.length]), [
      [first, 'mutex', 1],
      [second, 'mutex', 1],
    ])
    assert.equal(held.lostMember, null)
    const heldSignal = held.signal
    const [node] = await ephemeralsUnder(second)
    await raw.delete(node)
    await within(new Promise((resolve) => heldSignal.addEventListener('abort', resolve, { once: true })), 10000, 'the member lost')
    assert.deepEqual(heldSignal.reason.member, { path: second, kind: 'mutex' })
    assert.equal(heldSignal.reason.lostReason, 'nodeDeleted')
    assert.deepEqual(held.lostMember, { path: second, kind: 'mutex', lostReason: 'nodeDeleted' })
    await assert.rejects(held.release(), { code: codes.LOCK_LOST })
    assert.deepEqual(await ephemeralsUnder(first), [], 'the other member released')
    // Released (the first member) or lost (the second), no member has a token any more.
    assert.throws(() => held.fencingTokens, { code: codes.NOT_OWNER })
  } finally {
    await raw.close()
    await stalled.close()
    await proxy.stop()
  }
})

test('the max follows a shared count changed at run time: a waiter gets in when it grows', async () => {
  const semPath = uniquePath('sem-shared')
  const countPath = `${semPath}-count`
  const options = { sharedCount: { path: countPath, seed: 1 } }
  const [mine, theirs] = [client.semaphore(semPath, options), observer.semaphore(semPath, options)]
  const raw = await rawZooKeeper()
  try {
    const first = await mine.acquire()
    assert.equal(await theirs.currentMaxLeases(), 1, 'made with the seed')
    const waiting = theirs.acquire({ timeoutMs: 15000 })
    await partsBecome(semPath, 2, 1)
    const two = Buffer.alloc(4)
    two.writeInt32BE(2)
    await raw.setData(countPath, two) // as Curator's SharedCount.setCount stores it
    const second = await within(waiting, 10000, 'the waiter, let in by the new max')
    assert.ok(second instanceof Leases)
    assert.equal(await mine.currentMaxLeases(), 2)
    await assert.rejects(theirs.acquire({ leases: 3 }), { code: codes.INVALID_ARGUMENT, message: /max of 2/ })
    await Promise.all([first.release(), second.release()])
    // Not a 4-byte count: refused before any node is made.
    await raw.setData(countPath, Buffer.from('abc'))
    await assert.rejects(mine.acquire(), { code: codes.INVALID_ARGUMENT, message: /3 bytes/ })
    await partsBecome(semPath, 0, 0)
    await raw.delete(countPath)
  } finally {
    await raw.close()
  }
})

test('a multi-lock in both argument orders from two processes, repeatedly, without deadlock', async () => {
  const base = uniquePath('multi-order')
  const [a, b] = [`${base}/a`, `${base}/b`]
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zklock-node-multi-'))
  try {
    const inside = path.join(dir, 'inside')
    // A gate on a (first in canonical order) until both processes queue there, so that they
    // contend from their first round however slowly each starts.
    const gate = await client.lock(a).acquire()
    const runs = ['ab', 'ba'].map((order) => runScript('multi-contender.mjs', [a, b, order, '10', inside], { timeoutMs: 60000 }))
    await waitFor(async () => (await ephemeralsUnder(a)).length === 3, { timeoutMs: 30000, what: 'both processes queued' })
    await gate.release()
    const results = await Promise.all(runs.map((run) => run.exited))
    for (const { code, stderr, lines } of results) {
      assert.equal(code, 0, `${lines.join('\n')}\n${stderr}`)
      assert.equal(lines.at(-1), 'DONE')
      assert.equal(lines[0], `MEMBERS ${a} ${b}`, 'one canonical order, whatever the order given')
    }
    assert.deepEqual([...(await ephemeralsUnder(a)), ...(await ephemeralsUnder(b))], [])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a flow that holds a member lock re-enters it through a multi-lock, as in Python and C', async () => {
  const [a, b, c] = [uniquePath('multi-reenter-a'), uniquePath('multi-reenter-b'), uniquePath('multi-reenter-c')]
  const [lockA, lockB, lockC] = [client.lock(a), client.lock(b), client.lock(c)]
  const multi = client.multiLock([lockA, lockB])
  await lockA.withLock(async () => {
    // Without the re-entry this would wait on the flow's own node at a until the timeout.
    const held = await multi.acquire({ timeoutMs: 5000 })
    assert.ok(held, 'taken, a re-entered')
    assert.equal((await ephemeralsUnder(a)).length, 1, 'no second node at a')
    assert.equal((await ephemeralsUnder(b)).length, 1)
    await held.release()
    assert.equal(lockA.isHeld, true, 'the flow still holds a: the multi-lock gave back its level only')
    assert.deepEqual(await ephemeralsUnder(b), [])
    const ran = await multi.withLocks(async () => (await ephemeralsUnder(a)).length, { timeoutMs: 5000 })
    assert.equal(ran, 1)
    // Members held through two separate acquisitions cannot be one multi-lock's.
    await lockC.withLock(async () => {
      await assert.rejects(client.multiLock([lockA, lockC]).acquire({ timeoutMs: 5000 }), { code: codes.DEADLOCK })
    })
  })
  assert.deepEqual([...(await ephemeralsUnder(a)), ...(await ephemeralsUnder(b)), ...(await ephemeralsUnder(c))], [])
})

test('withLocks: canonical order, nested member locks re-enter, leases are members, a timeout leaves nothing', async () => {
  const [x, y] = [uniquePath('multi-x'), uniquePath('multi-y')]
  const semaphore = client.semaphore(uniquePath('multi-sem'), { maxLeases: 2 })
  const [lockX, rw] = [client.lock(x), client.readWriteLock(y)]
  const multi = client.multiLock([{ semaphore, leases: 2 }, rw.write, lockX])
  assert.ok(multi instanceof MultiLock)
  assert.deepEqual(
    multi.members.map((m) => [m.path, m.kind, m.count]),
    [[x, 'mutex', 1], [y, 'write', 1], [semaphore.path, 'leases', 2]].sort((p, q) => (p[0] < q[0] ? -1 : 1)),
  )
  const result = await multi.withLocks(async (held) => {
    assert.equal(held.state, 'held')
    // Nested: the multi-lock's owner re-enters its member locks, with no new node.
    await lockX.withLock(async () => rw.write.withLock(async () => {}))
    assert.equal((await ephemeralsUnder(x)).length, 1)
    assert.equal((await ephemeralsUnder(y)).length, 1)
    // Someone else waits, and a multi-lock of theirs over one member times out leaving nothing.
    const theirs = observer.multiLock([observer.lock(x)])
    assert.equal(await theirs.acquire({ timeoutMs: 300 }), null)
    await assert.rejects(theirs.withLocks(() => {}, { timeoutMs: 0 }), { code: codes.TIMEOUT, path: x })
    // The timeout names the member it waited for, not the first one, which it had.
    const first = `${x.slice(0, x.lastIndexOf('/'))}/0-first`
    const two = observer.multiLock([observer.lock(x), observer.lock(first)])
    assert.equal(two.members[0].path, first)
    await assert.rejects(two.withLocks(() => {}, { timeoutMs: 200 }), (error) => {
      assert.equal(error.code, codes.TIMEOUT)
      assert.equal(error.path, x)
      assert.match(error.message, /the mutex member was not acquired within/)
      return true
    })
    assert.deepEqual(await ephemeralsUnder(first), [], 'the first member, released')
    // An aborted multi-lock acquisition rejects once its nodes are removed.
    const controller = new AbortController()
    const aborted = theirs.acquire({ signal: controller.signal })
    await waitFor(async () => (await ephemeralsUnder(x)).length === 2, { what: 'theirs queued' })
    controller.abort()
    await assert.rejects(aborted, (error) => error instanceof AbortError)
    // Removed before the rejection if the server confirms within REMOVAL_GRACE (100 ms), else in
    // the background: on a loaded machine the confirmation can come later, never not at all.
    await waitFor(async () => (await ephemeralsUnder(x)).length === 1, { what: "the aborted attempt's node removed" })
    return held.fencingTokens.length
  })
  assert.equal(result, 3)
  assert.deepEqual([...(await ephemeralsUnder(x)), ...(await ephemeralsUnder(y)), ...(await ephemeralsUnder(semaphore.path))], [])
})

test('bad input is refused with ZKLOCK_INVALID_ARGUMENT before any traffic; a lock and a semaphore refuse each other’s path', async () => {
  const proxy = await startProxy()
  const stalledClient = await Client.connect(proxy.address)
  try {
    await proxy.command('stall')
    const semPath = uniquePath('sem-bad')
    const invalid = { code: codes.INVALID_ARGUMENT }
    assert.throws(() => stalledClient.semaphore(semPath, { maxLeases: 0 }), { code: codes.INVALID_ARGUMENT, message: /at least 1/ })
    for (const options of [
      undefined,
      {},
      { maxLeases: -1 },
      { maxLeases: 1.5 },
      { maxLeases: '3' },
      { maxLeases: 2, sharedCount: { path: '/count', seed: 1 } },
      { sharedCount: { path: '/count', seed: 0 } },
      { sharedCount: { path: '/count' } },
      { sharedCount: { path: 'relative', seed: 1 } },
      { sharedCount: { path: '/count', seed: 1, extra: 1 } },
      { max: 3 },
    ]) {
      assert.throws(() => stalledClient.semaphore(semPath, options), invalid, JSON.stringify(options))
    }
    assert.throws(() => stalledClient.semaphore('relative', { maxLeases: 1 }), invalid)
    const semaphore = stalledClient.semaphore(semPath, { maxLeases: 3 })
    await assert.rejects(semaphore.acquire({ leases: 0 }), { code: codes.INVALID_ARGUMENT, message: /not 0/ })
    await assert.rejects(semaphore.acquire({ leases: 4 }), { code: codes.INVALID_ARGUMENT, message: /max of 3/ })
    for (const options of [{ leases: -1 }, { leases: 2.5 }, { lease: 1 }, { timeoutMs: -1 }, { signal: 1 }]) {
      await assert.rejects(semaphore.acquire(options), invalid, JSON.stringify(options))
      await assert.rejects(semaphore.withLease(() => {}, options), invalid, JSON.stringify(options))
    }
    await assert.rejects(semaphore.withLease('no function'), invalid)

    const lock = stalledClient.lock(uniquePath('multi-bad'))
    for (const members of [
      [],
      'not an array',
      [lock, stalledClient.lock(lock.path)],
      [stalledClient.readWriteLock(uniquePath('rw'))],
      [{ semaphore, leases: 0 }],
      [{ semaphore, leases: 4 }],
      [{ semaphore, n: 1 }],
      [{ path: '/x' }],
      [null],
    ]) {
      assert.throws(() => stalledClient.multiLock(members), invalid, String(members))
    }
    const rw = stalledClient.readWriteLock(uniquePath('rw-sides'))
    assert.throws(() => stalledClient.multiLock([rw.read, rw.write]), { code: codes.INVALID_ARGUMENT, message: /both on this path/ })
    await assert.rejects(stalledClient.multiLock([lock]).acquire({ timeoutMs: 1.5 }), invalid)
    await proxy.command('pass')
    assert.deepEqual(await ephemeralsUnder(semPath), [])
  } finally {
    await stalledClient.close()
    await proxy.stop()
  }

  // Needs the server (the path's children say which recipe it is), but no node is made.
  const semPath = uniquePath('sem-conflict')
  const leases = await client.semaphore(semPath, { maxLeases: 2 }).acquire()
  await assert.rejects(observer.lock(semPath).acquire(), { code: codes.INVALID_ARGUMENT, message: /semaphore/ })
  await assert.rejects(observer.readWriteLock(semPath).read.acquire(), invalid => invalid.code === codes.INVALID_ARGUMENT)
  assert.deepEqual(await parts(semPath), [1, 0])
  await leases.release()
  const lockPath = uniquePath('lock-conflict')
  const hold = await client.lock(lockPath).acquire()
  await assert.rejects(observer.semaphore(lockPath, { maxLeases: 2 }).acquire(), {
    code: codes.INVALID_ARGUMENT,
    message: /a semaphore cannot use this path/,
  })
  assert.equal((await ephemeralsUnder(lockPath)).length, 1, 'nothing made beside the holder')
  await hold.release()
})

test("a closed client's semaphore and multi-lock reject with ZKLOCK_CLOSED, the stack showing the caller's line", async () => {
  const closed = await Client.connect(ZK)
  await closed.close()
  const semaphore = closed.semaphore(uniquePath('closed-sem'), { maxLeases: 2 })
  const multi = closed.multiLock([closed.lock(uniquePath('closed-multi')), { semaphore }])
  for (const call of [
    () => semaphore.acquire(),
    () => semaphore.withLease(async () => {}),
    () => semaphore.participants(),
    () => multi.acquire(),
    () => multi.withLocks(async () => {}),
  ]) {
    const rejected = await call().catch((error) => error)
    assert.equal(rejected.code, codes.CLOSED, String(call))
    assert.match(rejected.stack, /semaphore\.test\.mjs/, rejected.stack)
  }
})
