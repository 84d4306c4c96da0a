// Every deadline holds while the server cannot be reached (issue 45 item 2), as
// core/tests/deadline.rs asserts in Rust: a client through the fault proxy, its connection
// stalled, then cut, with calls pending on it (the report: a semaphore try rejected after 18.2 s,
// contenders() after 28.2 s, a lock try hung 35 s). A try (`timeoutMs: 0`) of a lock, a semaphore
// and a multi-lock, and a listing, reject with ZKLOCK_CONNECTION_LOSS within 2 s (never `null`,
// which says someone else holds, nor ZKLOCK_SESSION_EXPIRED); a timed acquire resolves `null`
// within 100 ms of its deadline; once the client gave its session up, a try still answers in 2 s.
// Once the server is back, nothing of theirs is left. And `timeoutMs: Infinity` waits forever.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, nodesBecome, startProxy, waitFor } from './helpers.mjs'

// Longer than the first outage, so the session outlives it.
const SESSION_MS = 6000
// A try's bound (2 s), and room for a loaded machine.
const TRY_LIMIT_MS = 3500
const TIMED_MS = 300
// The grace of 100 ms, and room for a loaded machine.
const OVERSHOOT_LIMIT_MS = 600

async function timed(call) {
  const start = performance.now()
  let result
  try {
    result = await call()
  } catch (err) {
    result = err
  }
  return { result, took: performance.now() - start }
}

async function unreachable(fault, { lock, busy, semaphore, multi }, timedToo) {
  const tries = [
    ['a try of a free lock', () => lock.acquire({ timeoutMs: 0 })],
    ['a try of a held lock', () => busy.acquire({ timeoutMs: 0 })],
    ["a semaphore's try", () => semaphore.acquire({ timeoutMs: 0 })],
    ["a multi-lock's try", () => multi.acquire({ timeoutMs: 0 })],
    ['a listing', () => busy.contenders()],
  ]
  // All at once, on one client, as the report had them.
  const answers = await Promise.all(tries.map(([, call]) => timed(call)))
  tries.forEach(([what], i) => {
    const { result, took } = answers[i]
    assert.equal(result?.code, codes.CONNECTION_LOSS, `${fault}: ${what} gave ${result} after ${took} ms`)
    assert.match(result.message, /could not be reached/, `${fault}: ${what}`)
    assert.ok(took <= TRY_LIMIT_MS, `${fault}: ${what} took ${took} ms`)
  })
  if (timedToo) {
    const { result, took } = await timed(() => lock.acquire({ timeoutMs: TIMED_MS }))
    assert.equal(result, null, `${fault}: a timed acquire gave ${result}`)
    assert.ok(took >= TIMED_MS - 5 && took <= TIMED_MS + OVERSHOOT_LIMIT_MS, `${fault}: a timed acquire took ${took} ms`)
  }
}

for (const fault of ['stall', 'cut']) {
  test(`tries, listings and timed calls keep their deadlines on a ${fault} connection`, async () => {
    const proxy = await startProxy()
    const direct = await Client.connect(ZK)
    const client = await Client.connect(proxy.address, { sessionTimeoutMs: SESSION_MS })
    const path = uniquePath(`deadline-${fault}`)
    try {
      const held = await direct.lock(`${path}/busy`).acquire()
      const calls = {
        lock: client.lock(`${path}/lock`),
        busy: client.lock(`${path}/busy`),
        semaphore: client.semaphore(`${path}/semaphore`, { maxLeases: 2 }),
      }
      calls.multi = client.multiLock([client.lock(`${path}/multi`), { semaphore: calls.semaphore, leases: 1 }])
      // Healthy: the paths are made, and a try answers.
      await (await calls.lock.acquire({ timeoutMs: 0 })).release()
      assert.equal(await calls.busy.acquire({ timeoutMs: 0 }), null)
      // A call pending on the client through the outage: a waiter behind the holder.
      const waiter = calls.busy.acquire({ timeoutMs: 60000 })
      await nodesBecome(`${path}/busy`, 2)

      await proxy.command(fault)
      await unreachable(fault, calls, true)
      await proxy.command('pass')
      await nodesBecome(`${path}/lock`, 0)
      await nodesBecome(`${path}/multi`, 0)
      await nodesBecome(`${path}/semaphore/leases`, 0)

      // The session given up: a try still answers within its bound.
      await proxy.command(fault)
      await waitFor(() => client.state === 'expired', { timeoutMs: 20000, what: 'the client gives its session up' })
      await unreachable(`${fault}, session given up`, calls, false)
      await proxy.command('pass')
      await held.release()
      const got = await waiter
      assert.ok(got, 'the pending waiter holds once the server is back')
      await got.release()
    } finally {
      await proxy.command('pass')
      await client.close()
      await direct.close()
      await proxy.stop()
    }
  })
}

test('timeoutMs: Infinity waits as long as it takes; every negative is refused, -1 included', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('infinity'))
    const hold = await lock.acquire({ timeoutMs: Infinity })
    assert.ok(hold, 'Infinity: held')
    await hold.release()
    const leases = await client.semaphore(uniquePath('infinity-semaphore'), { maxLeases: 1 }).acquire({ timeoutMs: Infinity })
    assert.ok(leases, 'Infinity: the semaphore too')
    await leases.release()
    for (const timeoutMs of [-1, -5, -Infinity, 1.5, NaN]) {
      const error = await lock.acquire({ timeoutMs }).catch((e) => e)
      assert.equal(error?.code, codes.INVALID_ARGUMENT, `timeoutMs: ${timeoutMs}`)
      assert.match(error.message, /Infinity \(or left out\) to wait as long as it takes/)
    }
  } finally {
    await client.close()
  }
})
