// Issue 44 item 6 in Node: an acquisition with no timeoutMs waits as long as it takes. A client
// talks to ZooKeeper through the fault proxy with a 2 s session and a 1 s connect timeout; one
// acquisition waits (`await lock.acquire()`) behind a holder connected directly. The proxy then
// cuts the client off for longer than its session and several connect timeouts, and more
// acquisitions begin meanwhile, each needing a new session: a mutex, a read/write lock's write and
// read sides, a semaphore and a multi-lock (a lease and a mutex), all with no timeoutMs. None may
// settle during the outage (before issue 44 each rejected with ZKLOCK_TIMEOUT, "no session within
// the connect timeout"); once the server is reachable again and the holder has released, each
// holds, on a new session.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { Client } from 'zookeeper-lock'
import { ZK, uniquePath, nodesBecome, startProxy, within } from './helpers.mjs'

const SESSION_MS = 2000
const CONNECT_MS = 1000
// Longer than the session (the waiter's session ends) and than several connect timeouts.
const OUTAGE_MS = 6000
// How long the acquisitions may take once the server is back (a new session, a queue).
const PATIENCE_MS = 30000

test('a forever acquisition of every recipe outlasts an outage longer than the connect timeout and the session', async () => {
  const proxy = await startProxy()
  const client = await Client.connect(proxy.address, { sessionTimeoutMs: SESSION_MS, connectTimeoutMs: CONNECT_MS })
  const holder = await Client.connect(ZK)
  const path = uniquePath('forever')
  try {
    const held = await holder.lock(path).acquire()
    // Each acquisition's outcome, as it settles: { value } or { error }, and when.
    const outcomes = new Map()
    const track = (what, promise) => {
      const outcome = { settled: false }
      outcomes.set(what, outcome)
      outcome.promise = promise.then(
        (value) => Object.assign(outcome, { settled: true, value, at: performance.now() }),
        (error) => Object.assign(outcome, { settled: true, error, at: performance.now() }),
      )
    }
    // A waiter queued before the outage, behind the direct holder.
    const queued = client.lock(path)
    track("the queued waiter's lock.acquire()", queued.acquire())
    await nodesBecome(path, 2)
    const before = (await holder.lock(path).contenders())[1].sessionId

    await proxy.command('cut')
    const t0 = performance.now()
    // Acquisitions begun during the outage: each needs a new session.
    const rw = client.readWriteLock(`${path}-rw`)
    const members = [client.lock(`${path}-multi-lock`), { semaphore: client.semaphore(`${path}-multi-semaphore`, { maxLeases: 1 }) }]
    track("a mutex's lock.acquire()", client.lock(`${path}-mutex`).acquire())
    track("a write lock's acquire()", rw.write.acquire())
    track("a read lock's acquire()", client.readWriteLock(`${path}-rw-read`).read.acquire())
    track("a semaphore's acquire()", client.semaphore(`${path}-semaphore`, { maxLeases: 2 }).acquire())
    track("a multi-lock's acquire()", client.multiLock(members).acquire())
    // The fault itself: an outage this long.
    await sleep(OUTAGE_MS)
    const ended = [...outcomes].filter(([, outcome]) => outcome.settled)
    assert.deepEqual(
      ended.map(([what, o]) => `${what}: ${o.error ?? o.value} after ${((o.at - t0) / 1000).toFixed(1)} s`),
      [],
      `settled during a ${OUTAGE_MS} ms outage (they wait forever)`,
    )

    await held.release()
    await proxy.command('pass')
    await within(Promise.all([...outcomes.values()].map((o) => o.promise)), PATIENCE_MS, 'every acquisition')
    console.log(`all settled ${((performance.now() - t0) / 1000).toFixed(1)} s after the outage began`)
    for (const [what, outcome] of outcomes) {
      assert.equal(outcome.error, undefined, `${what} holds once the server is back`)
      assert.ok(outcome.value, `${what} holds once the server is back: ${outcome.value}`)
    }
    const after = (await queued.holder()).sessionId
    assert.notEqual(after, before, 'they hold on a new session')
    await nodesBecome(path, 1) // the waiter's node of the ended session is gone
    for (const outcome of outcomes.values()) await outcome.value.release()
    await nodesBecome(path, 0)
  } finally {
    await proxy.command('pass')
    await client.close()
    await holder.close()
    await proxy.stop()
  }
})
