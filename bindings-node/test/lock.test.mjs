// The lock through one client: exclusion between async flows, reentrancy, timeouts, abort,
// ownership, identity. Lock nodes are observed through the server's `dump`, not through zklock.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'

import { Client, AbortError, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, deferred, startProxy, within, rawZooKeeper } from './helpers.mjs'

let client
before(async () => {
  client = await Client.connect(ZK, { sessionTimeoutMs: 10000 })
})
after(async () => {
  await client.close()
})

test('two async flows sharing one Lock exclude each other, first come first served', async () => {
  const path = uniquePath('flows')
  const lock = client.lock(path)
  const inside = new Set()
  const order = []
  const entered = [deferred(), deferred(), deferred()]
  const leave = [deferred(), deferred(), deferred()]
  const flow = (i) =>
    lock.withLock(async () => {
      assert.equal(inside.size, 0, `flow ${i} entered while ${[...inside]} held the lock`)
      inside.add(i)
      order.push(i)
      entered[i].resolve()
      await leave[i].promise
      inside.delete(i)
    })
  // Each flow queues only once the previous one's node is on the server, so arrival order is known.
  const flows = []
  for (let i = 0; i < 3; i++) {
    flows.push(flow(i))
    await nodesBecome(path, i + 1)
  }
  for (let i = 0; i < 3; i++) {
    await entered[i].promise
    assert.deepEqual(order, [0, 1, 2].slice(0, i + 1))
    assert.equal((await ephemeralsUnder(path)).length, 3 - i, 'the others still wait')
    leave[i].resolve()
    await flows[i]
  }
  await nodesBecome(path, 0)
})

test('sibling acquire() calls started by one async function exclude each other', async () => {
  // The case that ownership set with AsyncLocalStorage.enterWith would get wrong: the second
  // call runs in the context the first call was made from, yet is a contender of its own.
  const path = uniquePath('siblings')
  const lock = client.lock(path)
  const first = await lock.acquire()
  const second = lock.acquire({ timeoutMs: 300 })
  assert.equal(await second, null, 'a second acquire() in the same function must not re-enter')
  const third = lock.acquire()
  await nodesBecome(path, 2)
  const firstToken = first.fencingToken
  await first.release()
  // A released hold's token must not pass for a holder's.
  assert.throws(() => first.fencingToken, { code: codes.NOT_OWNER })
  const hold = await third
  assert.notEqual(hold.fencingToken, firstToken)
  await hold.release()
  await nodesBecome(path, 0)
})

test('inside withLock, nested withLock and acquire re-enter with no ZooKeeper traffic', async () => {
  // The client talks through a proxy that is stalled during the nested calls: anything that
  // needed the server would hang there.
  const proxy = await startProxy()
  const viaProxy = await Client.connect(proxy.address, { sessionTimeoutMs: 10000 })
  try {
    const path = uniquePath('nested')
    const lock = viaProxy.lock(path)
    await lock.withLock(async (outer) => {
      await proxy.command('stall')
      // A call that reached for the stalled server would hang: fail fast instead.
      const nested = await within(
        lock.withLock(async (hold) => {
          assert.equal(hold.fencingToken, outer.fencingToken)
          const inner = await lock.acquire()
          assert.equal(inner.fencingToken, outer.fencingToken)
          // Flows started from inside are part of the holder's flow too.
          const child = await new Promise((resolve, reject) =>
            setImmediate(() => lock.acquire().then((h) => h.release().then(() => resolve('child re-entered')), reject)),
          )
          await inner.release()
          return child
        }),
        5000,
        'the nested calls, which must not need the server',
      )
      assert.equal(nested, 'child re-entered')
      assert.ok(lock.isHeld)
      await proxy.command('pass')
    })
    assert.equal(lock.isHeld, false)
    await nodesBecome(path, 0)
  } finally {
    await viaProxy.close()
    await proxy.stop()
  }
})

test('hold.run() lets code nest under a hold from acquire()', async () => {
  const path = uniquePath('run')
  const lock = client.lock(path)
  const hold = await lock.acquire()
  const depthTwo = await hold.run(async () => {
    const again = await lock.acquire({ timeoutMs: 0 })
    assert.ok(again, 're-entry under hold.run() does not queue')
    await again.release()
    return 'nested'
  })
  assert.equal(depthTwo, 'nested')
  assert.equal((await ephemeralsUnder(path)).length, 1, 'the outer hold is still held')
  await hold.release()
  await nodesBecome(path, 0)
})

test('releasing from a flow that does not hold the lock rejects with ZKLOCK_NOT_OWNER', async () => {
  const path = uniquePath('not-owner')
  const lock = client.lock(path)
  const release = deferred()
  const holding = deferred()
  const flow = lock.withLock(async () => {
    holding.resolve()
    await release.promise
  })
  await holding.promise
  // This test's own flow is independent of the withLock function's flow.
  await assert.rejects(lock.release(), { code: codes.NOT_OWNER, name: 'ZkLockError' })
  assert.equal((await ephemeralsUnder(path)).length, 1, 'the holder still holds')
  release.resolve()
  await flow
  await assert.rejects(lock.release(), { code: codes.NOT_OWNER })
  // And a hold released twice does not release another level.
  const hold = await lock.acquire()
  await hold.release()
  await assert.rejects(hold.release(), { code: codes.NOT_OWNER })
  await nodesBecome(path, 0)
})

test('withLock releases when the function throws, and passes the error on', async () => {
  const path = uniquePath('throws')
  const lock = client.lock(path)
  const boom = new Error('boom')
  await assert.rejects(
    lock.withLock(async () => {
      assert.equal((await ephemeralsUnder(path)).length, 1)
      throw boom
    }),
    (error) => error === boom,
  )
  assert.equal(lock.isHeld, false)
  assert.deepEqual(await ephemeralsUnder(path), [])
  assert.equal(await lock.withLock(() => 42), 42)
})

test('timeout: acquire resolves to null, withLock rejects with ZKLOCK_TIMEOUT, no node is left', async () => {
  const path = uniquePath('timeout')
  const holderLock = client.lock(path)
  const hold = await holderLock.acquire()
  const waiter = client.lock(path)
  const started = Date.now()
  assert.equal(await waiter.acquire({ timeoutMs: 200 }), null)
  assert.ok(Date.now() - started >= 190, 'waited for the timeout')
  assert.equal(await waiter.acquire({ timeoutMs: 0 }), null, 'timeoutMs 0 only tries')
  await assert.rejects(waiter.withLock(() => assert.fail('must not run'), { timeoutMs: 100 }), {
    code: codes.TIMEOUT,
    path,
    // In core's words, as every language reports it.
    message: `timed out on ${path}: not acquired within 100ms`,
    // Made by the native acquisition, restacked where the caller awaits it.
    stack: /lock\.test\.mjs/,
  })
  assert.equal((await ephemeralsUnder(path)).length, 1, "only the holder's node remains")
  await hold.release()
  const tried = await waiter.acquire({ timeoutMs: 0 })
  assert.ok(tried, 'timeoutMs 0 obtains a free lock')
  await tried.release()
  await nodesBecome(path, 0)
})

test("AbortSignal: a waiting acquire rejects with AbortError and the attempt's node is removed", async () => {
  const path = uniquePath('abort')
  const hold = await client.lock(path).acquire()
  const waiter = client.lock(path)
  const controller = new AbortController()
  const attempt = waiter.acquire({ signal: controller.signal })
  await nodesBecome(path, 2)
  controller.abort(new Error('user gave up'))
  await assert.rejects(attempt, (error) => {
    assert.ok(error instanceof AbortError)
    assert.equal(error.name, 'AbortError')
    assert.equal(error.cause.message, 'user gave up')
    return true
  })
  await nodesBecome(path, 1)
  // An already aborted signal rejects at once; withLock honours signals too.
  await assert.rejects(waiter.acquire({ signal: AbortSignal.abort() }), { name: 'AbortError' })
  await assert.rejects(waiter.withLock(() => assert.fail('must not run'), { signal: AbortSignal.timeout(100) }), {
    name: 'AbortError',
  })
  await nodesBecome(path, 1)
  await hold.release()
  await nodesBecome(path, 0)
})

test('onLost covers a hold another flow took before it was registered: called once, with the reason', async () => {
  // The core's rule, as in C and Python: every hold of the lock, whoever took it and when.
  const path = uniquePath('on-lost')
  const lock = client.lock(path)
  const raw = await rawZooKeeper()
  try {
    const hold = await lock.acquire() // a flow of its own
    const nested = await hold.run(() => lock.acquire()) // two levels, one hold
    const reports = []
    let reported = deferred()
    const stop = client.lock(path).onLost((reason) => {
      reports.push(reason)
      reported.resolve()
    })
    const [node] = await ephemeralsUnder(path)
    await raw.delete(node)
    await within(reported.promise, 10000, 'the lost listener')
    assert.deepEqual(reports, ['nodeDeleted'])
    assert.equal(hold.state, 'lost')
    await assert.rejects(nested.release(), { code: codes.LOCK_LOST, lostReason: 'nodeDeleted' })
    await assert.rejects(hold.release(), { code: codes.LOCK_LOST, lostReason: 'nodeDeleted' })

    // Once: a later hold's loss is reported after the first's, with nothing between.
    reported = deferred()
    const later = await lock.acquire()
    const [again] = await ephemeralsUnder(path)
    await raw.delete(again)
    await within(reported.promise, 10000, 'the lost listener, again')
    assert.deepEqual(reports, ['nodeDeleted', 'nodeDeleted'])
    await assert.rejects(later.release(), { code: codes.LOCK_LOST })
    stop()
    stop() // idempotent
    assert.throws(() => lock.onLost('not a function'), { code: codes.INVALID_ARGUMENT })
  } finally {
    await raw.close()
  }
})

test('fencing tokens rise across holders; holder() and contenders() show identities', async () => {
  const path = uniquePath('identity')
  const lock = client.lock(path, { identifier: 'report-job' })
  const first = await lock.acquire()
  assert.equal(typeof first.fencingToken, 'bigint')
  assert.equal(first.state, 'held')
  const other = client.lock(path)
  const waiting = other.acquire()
  await nodesBecome(path, 2)
  const contenders = await lock.contenders()
  assert.equal(contenders.length, 2)
  assert.equal(contenders[0].identity.lang, 'node')
  assert.equal(contenders[0].identity.identifier, 'report-job')
  assert.equal(contenders[0].identity.pid, process.pid)
  assert.equal(contenders[0].fencingToken, first.fencingToken)
  assert.deepEqual((await lock.holder()).node, contenders[0].node)
  const firstToken = first.fencingToken
  await first.release()
  const second = await waiting
  assert.ok(second.fencingToken > firstToken)
  assert.equal(other.isHeld, true)
  assert.equal(other.state, 'held')
  await second.release()
  assert.equal(second.state, 'released')
  assert.equal(await lock.holder(), null)
  assert.deepEqual(await lock.contenders(), [])
})

test('await using releases the hold at the end of the block', async () => {
  const path = uniquePath('dispose')
  const lock = client.lock(path)
  {
    const hold = await lock.acquire()
    await hold[Symbol.asyncDispose]()
    assert.equal(hold.state, 'released')
    await hold[Symbol.asyncDispose]() // idempotent, as disposal must be
  }
  await nodesBecome(path, 0)
})

test("withLock passes on the function's own error when the lock was lost too, the release's attached", async () => {
  const own = await Client.connect(ZK)
  const lock = own.lock(uniquePath('body-error'))
  const bodyError = new RangeError("the function's own")
  const rejected = await lock
    .withLock(async () => {
      await own.close() // the hold is lost under the function
      throw bodyError
    })
    .catch((error) => error)
  assert.equal(rejected, bodyError, "the function's error, not the release's")
  assert.equal(rejected.releaseError?.code, codes.LOCK_LOST, String(rejected.releaseError))
})

test('an abort rejects once the attempt\'s node is gone, as a timeout resolves, for 50 waiters on one signal', async () => {
  const path = uniquePath('abort-then-gone')
  const holder = await client.lock(path).acquire()
  const controller = new AbortController()
  const waiters = Array.from({ length: 50 }, () => client.lock(path).acquire({ signal: controller.signal }))
  await nodesBecome(path, 51)
  controller.abort()
  const outcomes = await Promise.allSettled(waiters)
  assert.ok(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof AbortError), 'every waiter aborted')
  // No wait: by the time the rejections arrived, the nodes were gone.
  assert.equal((await ephemeralsUnder(path)).length, 1, "only the holder's node is left")
  await holder.release()
  await nodesBecome(path, 0)
})
