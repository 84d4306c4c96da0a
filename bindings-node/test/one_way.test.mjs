// Issue 42 in Node: a holder is told it lost the lock before the next holder gets it, whatever the
// fault (as core/tests/one_way.rs asserts in Rust). Holder H talks to ZooKeeper through the fault
// proxy, B connects directly and waits for the same lock; then the proxy stalls H both ways past
// its session, or holds only what H sends while the server's watch notifications still reach H,
// or cuts H's connection and lets its reconnect have only the ConnectResponse. The server expires
// H's session and lets B in: H's onLost listener and its hold's abort signal must have fired
// first, both instants read on performance.now() in this process. Right after B's acquire
// resolves, H's hold state and its lock's isHeld are read a few thousand times: never held.
// Learning the loss from the node's deletion, the event that lets B in, does not count.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { Client } from 'zookeeper-lock'
import { ZK, uniquePath, nodesBecome, startProxy, waitFor, watchedBy, within, deferred } from './helpers.mjs'

// Short, so the expiry comes quickly; long enough for a loaded machine not to miss heartbeats.
const SESSION_MS = 3000
// Bounds on the waits that the fault decides (an expiry takes about a session timeout).
const PATIENCE_MS = 20000
// H's hold read this many times right after B holds.
const READS = 5000
// The upstream stall: a watch notification for H every CHATTER_EVERY_MS, well past the session.
const CHATTER_EVERY_MS = 250
const CHATTER = Math.floor((SESSION_MS + 2500) / CHATTER_EVERY_MS)

/** H through the proxy holding a lock, B direct; `body(stage)` injects the fault. */
async function onStage(name, body) {
  const proxy = await startProxy()
  const h = await Client.connect(proxy.address, { sessionTimeoutMs: SESSION_MS })
  const b = await Client.connect(ZK, { sessionTimeoutMs: SESSION_MS })
  const path = uniquePath(name)
  try {
    assert.equal(h.sessionTimeoutMs, SESSION_MS)
    const disconnected = deferred()
    h.onStateChange((state) => state === 'disconnected' && disconnected.resolve())
    const lock = h.lock(path)
    const lost = { listener: null, signal: null, reason: null, told: deferred() }
    lock.onLost((reason) => {
      lost.listener ??= performance.now()
      lost.reason ??= reason
      lost.told.resolve()
    })
    const hold = await lock.acquire()
    hold.signal.addEventListener('abort', () => (lost.signal = performance.now()), { once: true })
    const hSession = (await lock.holder()).sessionId
    const stage = { name, proxy, h, b, path, lock, hold, hSession, lost, disconnected: disconnected.promise }
    await body(stage)
  } finally {
    await proxy.command('pass')
    await h.close()
    await b.close()
    await proxy.stop()
  }
}

/**
 * B's acquire, started now: `waiting` resolves to the instant it resolved, H's state then, and
 * the reads of H's state right after (in the same turn of the event loop). Returns once B is
 * queued (a promise of its own, not `waiting`, which an async function's result would adopt).
 */
async function bWaits(stage) {
  const { hold, lock } = stage
  const waiting = stage.b
    .lock(stage.path)
    .acquire({ timeoutMs: PATIENCE_MS })
    .then((bHold) => {
      const at = performance.now()
      const hThen = hold.state
      const held = []
      for (let i = 0; i < READS; i++) {
        if (hold.state === 'held' || lock.isHeld) held.push(performance.now() - at)
      }
      return { bHold, at, hThen, held, readsTook: performance.now() - at }
    })
  await nodesBecome(stage.path, 2)
  return { waiting }
}

/** Waits for B to hold, prints the instants against t0, and checks the order. */
async function check(stage, waiting, t0) {
  const { bHold, at, hThen, held, readsTook } = await waiting
  assert.ok(bHold, "B holds once the server expired H's session")
  // Given time to show up if it came late, for the report.
  await Promise.race([stage.lost.told.promise, sleep(5000)])
  const { listener, signal, reason } = stage.lost
  const when = (instant) => (instant === null ? 'never' : `${((instant - t0) / 1000).toFixed(3)} s`)
  console.log(
    `${stage.name}: H lost at ${when(listener)} (${reason}; its signal aborted at ${when(signal)}), ` +
      `B held at ${when(at)}, when H read ${hThen}; after, H read held ${held.length} times of ${READS} ` +
      `(the reads took ${readsTook.toFixed(1)} ms)`,
  )
  assert.ok(listener !== null, 'H is told it lost the lock (onLost)')
  assert.ok(listener <= at, `H was told it lost (${reason}) ${(listener - at).toFixed(1)} ms after B held`)
  assert.ok(signal !== null && signal <= at, `H's signal aborted at ${when(signal)}, B held at ${when(at)}`)
  assert.notEqual(reason, 'nodeDeleted', 'H learned of its loss only from the deletion that let B in')
  assert.equal(hThen, 'lost', "H's state when B held")
  assert.deepEqual(held, [], "H's hold state or isHeld read held after B held")
  assert.equal(stage.lock.isHeld, false)
  await bHold.release()
}

test('stall: a holder that hears nothing past its session is told it lost before the next holder enters', async () => {
  await onStage('stall', async (stage) => {
    const { waiting } = await bWaits(stage)
    const t0 = performance.now()
    await stage.proxy.command('stall')
    await check(stage, waiting, t0)
  })
})

test('stall-upstream: a holder cut off one way, notifications still arriving, is told it lost before the next holder enters', async () => {
  // H's requests and pings are held, while the watch notifications of locks it waits for
  // (released every CHATTER_EVERY_MS by B's client) still arrive, well past the session: a client
  // that takes any byte received for a sign that the server still hears it would keep believing
  // it holds.
  await onStage('stall-upstream', async (stage) => {
    const { waiting } = await bWaits(stage)
    const chatter = []
    const hWaiters = []
    for (let i = 0; i < CHATTER; i++) {
      const path = `${stage.path}-chatter-${i}`
      const held = await stage.b.lock(path).acquire()
      chatter.push(held)
      // Ends with H's client (rejected) or, should it get the lock back at the end, released.
      hWaiters.push(
        stage.h
          .lock(path)
          .acquire({ timeoutMs: 60000 })
          .then((hHold) => hHold && hHold.release())
          .catch(() => {}),
      )
      const node = `${path}/${(await stage.b.lock(path).holder()).node}`
      await waitFor(() => watchedBy(node, stage.hSession), { what: `H to watch ${node}` })
    }
    let stop = false
    let released = 0
    const t0 = performance.now()
    await stage.proxy.command('stall-upstream')
    const releases = (async () => {
      while (!stop && released < CHATTER) {
        await sleep(CHATTER_EVERY_MS)
        if (!stop) await chatter[released++].release()
      }
    })()
    try {
      await check(stage, waiting, t0)
    } finally {
      stop = true
      await releases
      console.log(`stall-upstream: ${released} of ${CHATTER} chatter locks released by then`)
      for (const held of chatter.slice(released)) await held.release()
    }
    assert.ok(released < CHATTER, 'B held while the chatter locks were still being released')
    await stage.h.close()
    await Promise.all(hWaiters)
  })
})

test('cut-after-connect-response: a reconnect cut after its ConnectResponse is told it lost before the next holder enters', async () => {
  // Issue 42 item 5: the proxy cuts H, lets only the ConnectResponse of H's reconnect through,
  // then refuses new connections. The reconnect renewed the session on the server, which expires
  // it a session timeout later and lets B in; H must be told first, and never read held after.
  await onStage('cut-after-connect-response', async (stage) => {
    const { waiting } = await bWaits(stage)
    const t0 = performance.now()
    await stage.proxy.command('cut')
    await within(stage.disconnected, PATIENCE_MS, "H's 'disconnected' state change")
    await stage.proxy.command('cut-after-connect-response')
    await stage.proxy.command('pass')
    await stage.proxy.command('wait-connect-cut') // H reconnected, got its ConnectResponse, and was cut
    console.log(`cut-after-connect-response: the ConnectResponse went through by ${((performance.now() - t0) / 1000).toFixed(3)} s`)
    await check(stage, waiting, t0)
  })
})
