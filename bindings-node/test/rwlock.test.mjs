// The read/write lock from Node: readers share, a writer excludes everyone, a late reader waits
// behind a waiting writer, downgrade and upgrade through async flows, timeouts and aborts that
// leave no node, loss on session expiry, a mutex refused on a read/write path, and order past
// ZooKeeper's 32-bit sequence limit. Lock nodes are observed through the server's `dump`.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'

import { Client, ReadWriteLock, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, deferred, startProxy, within, startSeededServer } from './helpers.mjs'

let client
let other
before(async () => {
  client = await Client.connect(ZK, { sessionTimeoutMs: 10000 })
  other = await Client.connect(ZK, { sessionTimeoutMs: 10000 })
})
after(async () => {
  await client.close()
  await other.close()
})

// Settles to 'pending' if `promise` has not settled once everything already queued has run.
async function settledYet(promise) {
  const marker = Symbol('pending')
  const settled = promise.then(
    () => 'resolved',
    () => 'rejected',
  )
  const outcome = await Promise.race([settled, new Promise((resolve) => setImmediate(() => resolve(marker)))])
  return outcome === marker ? 'pending' : outcome
}

test('readers share; a writer excludes readers and writers; participants carry their mode', async () => {
  const path = uniquePath('share')
  const rw = client.readWriteLock(path)
  const rwOther = other.readWriteLock(path)
  assert.ok(rw instanceof ReadWriteLock)
  assert.equal(rw.path, path)
  assert.equal(rw.read.mode, 'read')
  assert.equal(rw.write.mode, 'write')
  assert.equal(rw.read.path, path)

  const first = await rw.read.acquire()
  const second = await rwOther.read.acquire()
  assert.ok(first && second, 'two readers of two clients hold at once')
  const sameClient = await rw.read.acquire({ timeoutMs: 0 })
  assert.ok(sameClient, 'a third reader, another flow of the same Lock, holds too')
  assert.equal(rw.read.isHeld, true)
  assert.equal(rw.read.state, 'held')
  assert.equal(rw.write.isHeld, false)
  const readers = await rw.holders()
  assert.deepEqual(readers.map((p) => p.mode), ['read', 'read', 'read'])
  assert.deepEqual((await rw.read.holders()).map((p) => p.node), readers.map((p) => p.node))

  const writing = rwOther.write.acquire()
  await nodesBecome(path, 4)
  assert.equal(await rw.write.acquire({ timeoutMs: 0 }), null, 'a writer is refused while readers hold')
  const queue = await rw.contenders()
  assert.deepEqual(queue.map((p) => p.mode), ['read', 'read', 'read', 'write'])
  assert.equal((await rw.write.holder()).node, queue[0].node, 'the holder is the first reader')
  assert.equal(await settledYet(writing), 'pending')
  await first.release()
  await sameClient.release()
  assert.equal(await settledYet(writing), 'pending', 'one reader still holds')
  await second.release()
  const writer = await writing
  assert.deepEqual((await rw.holders()).map((p) => p.mode), ['write'])
  assert.equal(rwOther.write.isHeld, true)
  assert.equal(rw.read.isHeld, false)

  assert.equal(await rw.read.acquire({ timeoutMs: 200 }), null, 'a reader waits while a writer holds')
  assert.equal(await rw.write.acquire({ timeoutMs: 200 }), null, 'so does another writer')
  assert.equal((await ephemeralsUnder(path)).length, 1, 'the timed-out attempts left no node')
  await writer.release()
  await nodesBecome(path, 0)
  assert.equal(rwOther.write.isHeld, false)
  assert.equal(rwOther.write.state, null)
})

test('readers of one Lock holding at once each re-enter their own hold, in either order of release', async () => {
  const path = uniquePath('readers-reenter')
  const rw = client.readWriteLock(path)
  for (const firstOut of [0, 1]) {
    const held = [deferred(), deferred()]
    const leave = [deferred(), deferred()]
    const flows = [0, 1].map((i) =>
      rw.read.withLock(async (outer) => {
        held[i].resolve(outer)
        await leave[i].promise
        // After the other flow acquired (and, the second time round, after it released).
        const inner = await rw.read.acquire()
        assert.equal(inner.sequence, outer.sequence, `reader ${i} re-enters its own node`)
        assert.equal(inner.fencingToken, outer.fencingToken)
        await inner.release()
        assert.equal(outer.state, 'held', `reader ${i}'s nested release leaves its hold`)
      }),
    )
    const [first, second] = await Promise.all(held.map((h) => h.promise))
    assert.notEqual(first.sequence, second.sequence, 'two holds')
    leave[firstOut].resolve()
    await flows[firstOut]
    leave[1 - firstOut].resolve()
    await flows[1 - firstOut]
    await nodesBecome(path, 0)
  }
})

test('a reader that comes after a waiting writer waits behind it', async () => {
  const path = uniquePath('late-reader')
  const rw = client.readWriteLock(path)
  const rwOther = other.readWriteLock(path)
  const early = await rw.read.acquire()
  const order = []
  const writing = rwOther.write.acquire().then((hold) => (order.push('writer'), hold))
  await nodesBecome(path, 2)
  const reading = rw.read.acquire().then((hold) => (order.push('late reader'), hold))
  await nodesBecome(path, 3)
  // By the recipe's own account, only the early reader holds: the late one queues.
  assert.deepEqual(
    (await rw.holders()).map((p) => p.node),
    [(await rw.contenders())[0].node],
  )
  assert.equal(await settledYet(reading), 'pending')
  await early.release()
  const writer = await writing
  assert.equal(await settledYet(reading), 'pending', 'the late reader still waits for the writer')
  assert.deepEqual(order, ['writer'])
  await writer.release()
  const late = await reading
  assert.deepEqual(order, ['writer', 'late reader'])
  await late.release()
  await nodesBecome(path, 0)
})

test('downgrade: the writer takes a read node in its place, lets the write side go, and a waiting writer stays out until the read goes', async () => {
  const path = uniquePath('downgrade')
  const rw = client.readWriteLock(path)
  const rwOther = other.readWriteLock(path)
  const write = await rw.write.acquire()
  // The read side in the writer's flow: a read node with the write node's sequence, and the
  // write hold's token.
  const read = await within(write.run(() => rw.read.acquire()), 5000, "the downgrade in the writer's flow")
  assert.equal(read.fencingToken, write.fencingToken)
  assert.equal(read.sequence, write.sequence)
  assert.equal((await ephemeralsUnder(path)).length, 2)
  const waitingWriter = rwOther.write.acquire()
  await nodesBecome(path, 3)
  await write.release()
  assert.equal(rw.write.isHeld, false)
  assert.equal(rw.read.isHeld, true)
  assert.equal(rw.read.state, 'held')
  assert.equal((await ephemeralsUnder(path)).length, 2, "the read node and the waiting writer's")
  const holders = await rw.holders()
  assert.equal(holders.length, 1)
  assert.equal(holders[0].mode, 'read', 'the downgraded read holds')
  assert.equal(holders[0].sequence, read.sequence, "in the write node's place")
  assert.equal(await settledYet(waitingWriter), 'pending', 'the writer that was waiting stays out')
  const readToken = read.fencingToken
  await read.release()
  const next = await waitingWriter
  assert.ok(next.fencingToken > readToken)
  await next.release()
  await nodesBecome(path, 0)

  // The same inside withLock: the read taken in the write flow outlives it.
  let reading
  await rw.write.withLock(async (writeHold) => {
    reading = await rw.read.withLock(async (inner) => {
      assert.equal(inner.fencingToken, writeHold.fencingToken)
      return rw.read.acquire()
    })
  })
  assert.equal(rw.write.isHeld, false)
  assert.equal(rw.read.isHeld, true)
  assert.equal((await ephemeralsUnder(path)).length, 1)
  await reading.release()
  await nodesBecome(path, 0)
  assert.equal(rw.read.isHeld, false)
})

test("a flow's second downgrade is a hold of its own: its re-entries are of it, not of the first", async () => {
  const path = uniquePath('downgrade-twice')
  const rw = client.readWriteLock(path)
  await rw.write.withLock(async (write) => {
    const first = await rw.read.acquire()
    const firstAgain = await rw.read.acquire()
    await firstAgain.release()
    await first.release()
    assert.equal(first.state, 'released')
    const second = await rw.read.acquire()
    const nested = await rw.read.acquire()
    assert.equal(nested.state, 'held', "the re-entry is the second read hold's level")
    assert.equal(first.state, 'released', 'the first stays released')
    assert.equal(nested.fencingToken, write.fencingToken)
    await nested.release()
    assert.equal(second.state, 'held', 'a nested release leaves the hold')
    await second.release()
    assert.equal(second.state, 'released')
  })
  await nodesBecome(path, 0)
})

test('upgrade is refused at once with ZKLOCK_DEADLOCK, with no ZooKeeper traffic and the caller\'s stack', async () => {
  const proxy = await startProxy()
  const viaProxy = await Client.connect(proxy.address, { sessionTimeoutMs: 10000 })
  try {
    const path = uniquePath('upgrade')
    const rw = viaProxy.readWriteLock(path)
    const read = await rw.read.acquire()
    // Anything that reached for the stalled server would hang.
    await proxy.command('stall')
    const refused = await within(
      read.run(() => rw.write.acquire()).catch((error) => error),
      5000,
      'the refusal, which must not need the server',
    )
    assert.equal(refused.code, codes.DEADLOCK, String(refused))
    assert.equal(refused.path, path)
    assert.match(refused.message, /holds the read lock and asked for the write lock/)
    assert.match(refused.stack, /rwlock\.test\.mjs/, refused.stack)
    const viaWithLock = await within(
      read.run(() => rw.write.withLock(async () => 'upgraded')).catch((error) => error),
      5000,
      'the refusal through withLock',
    )
    assert.equal(viaWithLock.code, codes.DEADLOCK, String(viaWithLock))
    assert.match(viaWithLock.stack, /rwlock\.test\.mjs/, viaWithLock.stack)
    await proxy.command('pass')
    assert.equal(read.state, 'held', 'the read hold is untouched')
    assert.equal((await ephemeralsUnder(path)).length, 1, 'no write node was created')
    // Outside the reader's flow, a write acquisition is another owner: it queues.
    assert.equal(await rw.write.acquire({ timeoutMs: 0 }), null)
    await read.release()
    await nodesBecome(path, 0)
  } finally {
    await viaProxy.close()
    await proxy.stop()
  }
})

test('timeouts, tries and aborted signals leave no node, on either side', async () => {
  const path = uniquePath('give-up')
  const rw = client.readWriteLock(path)
  const rwOther = other.readWriteLock(path)
  for (const [blocker, side] of [
    [rwOther.write, rw.read],
    [rwOther.read, rw.write],
  ]) {
    const held = await blocker.acquire()
    assert.equal(await side.acquire({ timeoutMs: 150 }), null, `${side.mode} timed out`)
    assert.equal(await side.acquire({ timeoutMs: 0 }), null, `${side.mode} tried`)
    await assert.rejects(side.withLock(async () => {}, { timeoutMs: 100 }), { code: codes.TIMEOUT, path })
    const controller = new AbortController()
    const aborted = side.acquire({ signal: controller.signal })
    await nodesBecome(path, 2)
    controller.abort()
    await assert.rejects(aborted, { name: 'AbortError' })
    await nodesBecome(path, 1)
    assert.equal(side.isHeld, false)
    await held.release()
    await nodesBecome(path, 0)
  }
})

test('session expiry: a read hold is lost, not held, its signal aborts, and a waiting writer gets in', async () => {
  const proxy = await startProxy()
  const viaProxy = await Client.connect(proxy.address, { sessionTimeoutMs: 2000 })
  try {
    const path = uniquePath('expiry')
    const rw = viaProxy.readWriteLock(path)
    const read = await rw.read.acquire()
    const writing = other.readWriteLock(path).write.acquire()
    await nodesBecome(path, 2)
    const signal = read.signal
    const aborted = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    await proxy.command('stall')
    await aborted
    assert.equal(signal.reason.code, codes.LOCK_LOST)
    assert.equal(read.state, 'lost')
    assert.equal(rw.read.state, 'lost')
    assert.equal(rw.read.isHeld, false, 'a lost hold is not held')
    const nested = await read.run(() => rw.read.acquire()).catch((error) => error)
    assert.equal(nested.code, codes.LOCK_LOST, String(nested))
    // The server expires the stalled session and deletes the read node: the writer gets in.
    const writer = await within(writing, 15000, 'the writer, once the expired reader is gone')
    await proxy.command('pass')
    await assert.rejects(read.release(), { code: codes.LOCK_LOST })
    assert.equal(rw.read.isHeld, false)
    assert.equal(rw.read.state, null, 'released: no hold left')
    await writer.release()
    await nodesBecome(path, 0)
  } finally {
    await viaProxy.close()
    await proxy.stop()
  }
})

test('a mutex and a read/write lock refuse to share a path, naming the conflict, creating nothing', async () => {
  const path = uniquePath('conflict')
  const read = await client.readWriteLock(path).read.acquire()
  const mutex = other.lock(path)
  assert.equal(mutex.mode, 'exclusive')
  await assert.rejects(mutex.acquire(), {
    code: codes.INVALID_ARGUMENT,
    path,
    message: /a mutex cannot use this path: it holds read\/write lock nodes \(read node /,
  })
  await assert.rejects(mutex.withLock(async () => {}), { code: codes.INVALID_ARGUMENT })
  assert.equal((await ephemeralsUnder(path)).length, 1)
  await read.release()
  await nodesBecome(path, 0)

  const mutexPath = uniquePath('conflict-mutex')
  const held = await client.lock(mutexPath).acquire()
  assert.deepEqual((await client.lock(mutexPath).contenders()).map((p) => p.mode), ['exclusive'])
  const rw = other.readWriteLock(mutexPath)
  for (const side of [rw.read, rw.write]) {
    await assert.rejects(side.acquire({ timeoutMs: 5000 }), {
      code: codes.INVALID_ARGUMENT,
      message: /a read\/write lock cannot use this path: it holds mutex nodes \(exclusive node /,
    })
  }
  assert.equal((await ephemeralsUnder(mutexPath)).length, 1)
  await held.release()
  await nodesBecome(mutexPath, 0)
})

test('bad input to readWriteLock is refused before any traffic', async () => {
  const invalid = { code: codes.INVALID_ARGUMENT }
  for (const badPath of ['', 'relative', '/', '/a/', 7, null]) {
    assert.throws(() => client.readWriteLock(badPath), invalid, `path ${badPath}`)
  }
  assert.throws(() => client.readWriteLock('/ok', { identifier: 5 }), invalid)
  assert.throws(() => client.readWriteLock('/ok', { mode: 'read' }), invalid)
  assert.throws(() => new ReadWriteLock(), invalid)
})

test('past the 32-bit sequence limit, readers and writers still hold in arrival order', async () => {
  const path = '/locks/overflow'
  const start = 2_147_483_640
  const server = await startSeededServer(path, start)
  const clients = []
  try {
    for (let i = 0; i < 3; i++) clients.push(await Client.connect(server.connect, { sessionTimeoutMs: 10000 }))
    const gate = await clients[0].readWriteLock(path, { identifier: 'gate' }).write.acquire()
    assert.equal(gate.sequence, start, 'the snapshot put the counter just below the limit')
    // Groups in arrival order: readers together, each writer alone.
    const kinds = ['r', 'r', 'w', 'r', 'r', 'r', 'w', 'w', 'r', 'r', 'w', 'r', 'r', 'w']
    const groups = []
    for (const [i, kind] of kinds.entries()) {
      if (kind === 'w' || groups.at(-1)?.kind !== 'r') groups.push({ kind, members: [] })
      groups.at(-1).members.push(i)
    }
    const groupOf = (i) => groups.find((g) => g.members.includes(i))
    for (const group of groups) group.all = deferred()
    const inside = new Set()
    const entered = []
    const runs = []
    for (const [i, kind] of kinds.entries()) {
      const rw = clients[i % clients.length].readWriteLock(path, { identifier: `c${i}` })
      const side = kind === 'r' ? rw.read : rw.write
      runs.push(
        side.withLock(async () => {
          const group = groupOf(i)
          if (kind === 'w') assert.equal(inside.size, 0, `writer c${i} entered beside ${[...inside]}`)
          else assert.ok([...inside].every((j) => kinds[j] === 'r'), `reader c${i} entered beside a writer`)
          inside.add(i)
          entered.push(i)
          // Readers of one group leave only once all of them are in: they must share.
          if (group.members.every((j) => entered.includes(j))) group.all.resolve()
          await group.all.promise
          inside.delete(i)
        }),
      )
      await nodesBecome(path, i + 2, 10000, server.connect)
    }
    const queue = await clients[1].readWriteLock(path).contenders()
    const sequences = queue.map((p) => p.sequence)
    assert.ok(
      sequences.filter((s) => s === 2 ** 31 - 1).length > 1 || sequences.some((s) => s < 0),
      `the run must cross the limit (repeated maximum or negatives): ${sequences}`,
    )
    assert.deepEqual(
      queue.map((p) => p.identity.identifier),
      ['gate', ...kinds.map((_, i) => `c${i}`)],
      'queue order is arrival order',
    )
    assert.deepEqual(queue.map((p) => p.mode), ['write', ...kinds.map((k) => (k === 'r' ? 'read' : 'write'))])
    await gate.release()
    await within(Promise.all(runs), 30000, 'every contender to hold and release')
    // Every group held after the one before it had all held.
    const position = (i) => entered.indexOf(i)
    for (let g = 1; g < groups.length; g++) {
      const lastBefore = Math.max(...groups[g - 1].members.map(position))
      const firstNow = Math.min(...groups[g].members.map(position))
      assert.ok(lastBefore < firstNow, `group ${g} (${groups[g].members}) entered before group ${g - 1} finished: ${entered}`)
    }
    await nodesBecome(path, 0, 10000, server.connect)
  } finally {
    for (const each of clients) await each.close()
    await server.stop()
  }
})
