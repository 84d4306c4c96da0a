// Sessions: a real expiry (through the fault proxy), closing, state changes, and bad input.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, startProxy, within, deferred } from './helpers.mjs'

test("session expiry: holds' signals abort with ZKLOCK_LOCK_LOST, states are lost, waiters queue again on a new session", async () => {
  const proxy = await startProxy()
  const client = await Client.connect(proxy.address, { sessionTimeoutMs: 2000 })
  const observer = await Client.connect(ZK)
  const states = []
  const expired = deferred()
  const stopListening = client.onStateChange((state) => {
    states.push(state)
    if (state === 'expired') expired.resolve()
  })
  try {
    const path = uniquePath('expiry')
    const lock = client.lock(path)
    const hold = await lock.acquire()
    const token = hold.fencingToken
    // A second lock of the same session, waiting behind another client's hold.
    const busyPath = uniquePath('expiry-busy')
    const busy = await observer.lock(busyPath).acquire()
    const waiting = client.lock(busyPath).acquire()
    await nodesBecome(busyPath, 2)
    // Work in withLock that finishes after the loss does not pass for done under the lock.
    const entered = deferred()
    const work = client.lock(uniquePath('expiry-work')).withLock(async (workHold) => {
      entered.resolve()
      await new Promise((resolve) => workHold.signal.addEventListener('abort', resolve, { once: true }))
      return 'finished'
    })
    const workRejects = assert.rejects(work, { code: codes.LOCK_LOST })
    await entered.promise
    const signal = hold.signal
    assert.equal(signal.aborted, false)
    const aborted = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    await proxy.command('stall')
    await aborted
    assert.equal(signal.reason.code, codes.LOCK_LOST)
    assert.ok(['sessionExpired', 'disconnectedTooLong'].includes(signal.reason.lostReason), signal.reason.lostReason)
    assert.equal(hold.state, 'lost')
    assert.equal(lock.state, 'lost')
    // A lost hold has no fencing token (as in C and Python): a resource must not take it.
    assert.throws(() => hold.fencingToken, { code: codes.LOCK_LOST })
    await workRejects
    // The server expires the stalled session, and its nodes with it.
    await nodesBecome(path, 0, 15000)
    await nodesBecome(busyPath, 1)
    await busy.release()
    await proxy.command('pass')
    // The waiter lost its node and its place with the session, and queued again on a new one.
    const requeued = await within(waiting, 15000, 'the waiter, queued again on a new session')
    assert.equal(requeued.state, 'held')
    await requeued.release()
    await assert.rejects(hold.release(), { code: codes.LOCK_LOST })
    assert.equal(lock.isHeld, false)
    await within(expired.promise, 10000, "the 'expired' state change")
    assert.ok(states.indexOf('disconnected') < states.indexOf('expired'), states.join())
    // The next acquisition establishes a new session.
    const again = await lock.acquire()
    assert.equal(client.state, 'connected')
    assert.ok(again.fencingToken > token)
    await again.release()
  } finally {
    stopListening()
    await client.close()
    await observer.close()
    await proxy.stop()
  }
})

test("left-out timeouts are the core's defaults, the same in every language", async () => {
  // The session timeout asked when none is given is the core's 10000 ms (the test server grants it).
  for (const options of [undefined, {}, { sessionTimeoutMs: undefined, connectTimeoutMs: null }]) {
    const client = await Client.connect(ZK, options)
    try {
      assert.equal(client.sessionTimeoutMs, 10000, JSON.stringify(options))
    } finally {
      await client.close()
    }
  }
  const client = await Client.connect(ZK, { sessionTimeoutMs: 12500 })
  assert.equal(client.sessionTimeoutMs, 12500, 'a given timeout is asked instead')
  await client.close()
})

test('close(): pending acquisitions reject with ZKLOCK_CLOSED, holds are lost, nodes go at once', async () => {
  const client = await Client.connect(ZK, { sessionTimeoutMs: 20000 })
  const observer = await Client.connect(ZK)
  const path = uniquePath('close')
  const held = await observer.lock(path).acquire()
  const lock = client.lock(path)
  const pending = lock.acquire()
  await nodesBecome(path, 2)
  const states = []
  client.onStateChange((state) => states.push(state))
  const rejected = assert.rejects(pending, { code: codes.CLOSED })
  await client.close()
  // Delivered by the time close() resolves: callbacks alone would not keep the process alive.
  assert.equal(states.at(-1), 'closed')
  assert.equal(client.state, 'closed')
  await rejected
  // Gone with the session's close, not 20 s later with its timeout.
  await nodesBecome(path, 1, 3000)
  await held.release()
  await observer.close()

  const other = await Client.connect(ZK)
  const hold = await other.lock(uniquePath('close-held')).acquire()
  const signal = hold.signal
  await other.close()
  assert.ok(signal.aborted, 'the signal aborted by the time close() resolved')
  assert.equal(signal.reason.code, codes.LOCK_LOST)
  assert.equal(signal.reason.lostReason, 'closed')
  assert.equal(hold.state, 'lost')
  await assert.rejects(other.lock('/x').acquire(), { code: codes.CLOSED })
  await other.close() // idempotent
})

test('bad input is rejected with ZKLOCK_INVALID_ARGUMENT before any network traffic', async () => {
  // Through a stalled proxy: anything that reached for the server would hang instead.
  const proxy = await startProxy()
  const client = await Client.connect(proxy.address, { sessionTimeoutMs: 10000 })
  try {
    await proxy.command('stall')
    const path = uniquePath('bad-input')
    const lock = client.lock(path)
    const invalid = { code: codes.INVALID_ARGUMENT }
    for (const hosts of ['', 42, undefined, ',', '127.0.0.1:99999', '127.0.0.1:2181/chroot/']) {
      await assert.rejects(Client.connect(hosts), invalid, `hosts ${hosts}`)
    }
    for (const options of [
      { sessionTimeoutMs: 0 },
      { sessionTimeoutMs: -5 },
      { sessionTimeoutMs: 1.5 },
      { connectTimeoutMs: '10' },
      { sessionTimeoutMs: 2 ** 40 },
      { auth: 'nocolon' },
      { sessionTimeout: 1000 },
      'fast',
    ]) {
      await assert.rejects(Client.connect(ZK, options), invalid, JSON.stringify(options))
    }
    for (const badPath of ['', 'relative', '/', '/a//b', '/a/', '/zookeeper/x', 7, null]) {
      assert.throws(() => client.lock(badPath), invalid, `path ${badPath}`)
    }
    // Outside the Basic Multilingual Plane: ZooKeeper refuses it, so zklock does, before any traffic.
    assert.throws(() => client.lock('/probe/\u{1f512}'), { code: codes.INVALID_ARGUMENT, message: /U\+1F512/ })
    assert.throws(() => client.lock('/ok', { identifier: 5 }), invalid)
    assert.throws(() => client.lock('/ok', { id: 'x' }), invalid)
    for (const options of [{ timeoutMs: -1 }, { timeoutMs: NaN }, { timeoutMs: '5' }, { timeoutMs: 2 ** 31 }, { signal: {} }, { wait: 1 }, 5]) {
      await assert.rejects(lock.acquire(options), invalid, JSON.stringify(options))
      await assert.rejects(lock.withLock(() => {}, options), invalid, JSON.stringify(options))
    }
    await assert.rejects(lock.withLock('not a function'), invalid)
    assert.throws(() => client.onStateChange('nope'), invalid)
    assert.throws(() => new Client(), invalid)
    await assert.rejects(lock.release(), { code: codes.NOT_OWNER })
    const error = await lock.acquire({ timeoutMs: -1 }).catch((e) => e)
    assert.ok(error instanceof Error)
    assert.match(error.message, /timeoutMs/)
    await proxy.command('pass')
    assert.deepEqual(await ephemeralsUnder(path), [])
  } finally {
    await client.close()
    await proxy.stop()
  }
})
