// The core's hardening, seen from Node: requests over the packet limit, connect errors that say
// why, a missing chroot, and the order in which one client's acquisitions reach the server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import net from 'node:net'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder } from './helpers.mjs'

test('an oversized path, identifier or packet limit is refused up front, naming it', async () => {
  const client = await Client.connect(ZK)
  try {
    const started = Date.now()
    assert.throws(() => client.lock('/zklock-node-test/' + 'p'.repeat(1_100_000)), {
      code: codes.INVALID_ARGUMENT,
      message: /lock path of 1100018 bytes.*jute\.maxbuffer/,
    })
    const path = uniquePath('oversized')
    assert.throws(() => client.lock(path, { identifier: 'i'.repeat(2_000_000) }), {
      code: codes.INVALID_ARGUMENT,
      message: /identifier of 2000000 bytes/,
    })
    assert.ok(Date.now() - started < 1000)
    await client.lock(path).withLock(async () => {})
    assert.deepEqual(await ephemeralsUnder(path), [])
  } finally {
    await client.close()
  }
  const small = await Client.connect(ZK, { juteMaxbuffer: 64 * 1024 })
  try {
    assert.throws(() => small.lock(`${uniquePath('small')}/${'p'.repeat(100_000)}`), {
      code: codes.INVALID_ARGUMENT,
      message: /packet limit of 65536 bytes.*set the client option juteMaxbuffer to match/,
    })
  } finally {
    await small.close()
  }
  // Not a whole number of bytes that 32 bits hold: the binding's check, naming its option.
  for (const juteMaxbuffer of [-1, 2 ** 32, NaN, '1m']) {
    await assert.rejects(Client.connect(ZK, { juteMaxbuffer }), { code: codes.INVALID_ARGUMENT, message: /juteMaxbuffer/ })
  }
  // Too small for a lock request: the core's (see below).
  for (const juteMaxbuffer of [0, 10]) {
    await assert.rejects(Client.connect(ZK, { juteMaxbuffer }), { code: codes.INVALID_ARGUMENT, message: /too small: a lock request needs at least 1024 bytes/ })
  }
})

// The core's words, as every language reports them, naming the option as Node spells it
// (bindings-python/tests/test_edges.py says the same with Python's).
const TOO_SMALL = 'invalid argument on localhost:1: juteMaxbuffer of 1023 bytes is too small: a lock request needs at least 1024 bytes'

test("a packet limit too small for a lock is refused before any traffic, in the core's words", async () => {
  // Nothing listens on localhost:1: reaching the network would end in a timeout instead.
  const started = Date.now()
  const err = await Client.connect('localhost:1', { juteMaxbuffer: 1023 }).then(
    () => assert.fail('connected'),
    (error) => error,
  )
  assert.equal(err.code, codes.INVALID_ARGUMENT, String(err))
  assert.equal(err.message, TOO_SMALL)
  assert.ok(Date.now() - started < 2000, 'refused before any network traffic')
  // The least the core takes is enough to connect.
  const smallest = await Client.connect(ZK, { juteMaxbuffer: 1024 })
  await smallest.close()
})

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

test('a request the server keeps refusing ends in ZKLOCK_CONNECTION_LOSS naming the limit and its option', async () => {
  // Told the servers take 16 MB, the client sends a 2 MB path; the server (1 MB) drops the
  // connection each time.
  const client = await Client.connect(ZK, { juteMaxbuffer: 16 << 20 })
  try {
    const path = uniquePath('refused')
    await assert.rejects(client.lock(`${path}/${'p'.repeat(2 << 20)}`).acquire({ timeoutMs: 120000 }), {
      code: codes.CONNECTION_LOSS,
      message: /jute\.maxbuffer\).* set the client option juteMaxbuffer /,
    })
    await client.lock(path).withLock(async () => {})
  } finally {
    await client.close()
  }
})

test('connect errors name the cause for each host, and carry the connect string', async () => {
  const refused = `127.0.0.1:${await freePort()}`
  await assert.rejects(Client.connect(refused, { connectTimeoutMs: 2000 }), (err) => {
    assert.equal(err.code, codes.TIMEOUT)
    assert.match(err.message, /connection refused/)
    assert.equal(err.path, refused)
    return true
  })
  await assert.rejects(Client.connect('no-such-host.invalid:2181', { connectTimeoutMs: 2000 }), {
    code: codes.TIMEOUT,
    message: /cannot resolve/,
  })
})

test('a missing chroot says so', async () => {
  const connect = `${ZK}/zklock-node-no-such-chroot-${process.pid}-${Date.now()}`
  await assert.rejects(Client.connect(connect), (err) => {
    assert.equal(err.code, codes.ZOOKEEPER)
    assert.equal(err.zookeeperCode, -101)
    assert.match(err.message, /does not exist/)
    return true
  })
})

test("one client's acquisitions reach the server in the order they were made", async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('fifo'))
    for (let round = 0; round < 30; round++) {
      const order = []
      await Promise.all([0, 1, 2, 3, 4, 5].map((i) => lock.withLock(async () => order.push(i))))
      assert.deepEqual(order, [0, 1, 2, 3, 4, 5], `round ${round}`)
      const holds = []
      for (let i = 0; i < 4; i++) holds.push(lock.acquire().then((hold) => ({ i, hold })))
      const served = []
      for (let i = 0; i < 4; i++) {
        const { i: who, hold } = await Promise.race(holds.filter((_, j) => !served.includes(j)))
        served.push(who)
        await hold.release()
      }
      assert.deepEqual(served, [0, 1, 2, 3], `round ${round}: back-to-back acquire() calls`)
    }
  } finally {
    await client.close()
  }
})
