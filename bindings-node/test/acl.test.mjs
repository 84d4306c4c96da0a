// Access control on lock nodes (the `acl` option), against a real ZooKeeper: other clients,
// unauthenticated or authenticated as someone else, can list the queue and read who holds, but
// their acquisitions reject with ZKLOCK_PERMISSION_DENIED naming the ACL problem and the path,
// leave nothing behind and take nothing from the holder; clients of the owner's credentials queue
// together; the owner releases and its node goes. (The direct delete of a holder's node with a
// plain ZooKeeper client is tried in core/tests/acl.rs and bindings-python/tests/test_acl.py.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'

import { Client, codes, perms } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, rawZooKeeper } from './helpers.mjs'

const ALICE = 'alice:alice-secret'
const BOB = 'bob:bob-secret'

/** The identity ZooKeeper's digest scheme stores: user:base64(sha1("user:password")). */
function digestId(credentials) {
  const user = credentials.split(':')[0]
  return `${user}:${createHash('sha1').update(credentials).digest('base64')}`
}

async function denied(promise, path, words) {
  const err = await promise.then(
    () => assert.fail('acquired what it had no right to'),
    (error) => error,
  )
  assert.equal(err.code, codes.PERMISSION_DENIED, String(err))
  assert.equal(err.path, path)
  assert.ok(err.message.includes(path) && err.message.includes(words), err.message)
  assert.match(err.stack, /acl\.test\.mjs/, "the stack shows the caller's line")
  return err
}

test("creatorAllWorldRead: others list the queue but cannot queue; the owner's other clients can", async () => {
  const path = uniquePath('acl-world-read')
  const alice = await Client.connect(ZK, { auth: ALICE })
  const alice2 = await Client.connect(ZK, { auth: ALICE })
  const bob = await Client.connect(ZK, { auth: BOB })
  const anonymous = await Client.connect(ZK)
  try {
    const lock = alice.lock(path, { acl: 'creatorAllWorldRead' })
    const hold = await lock.acquire()
    const token = hold.fencingToken

    const outsider = anonymous.lock(path)
    const [holder] = await outsider.contenders()
    assert.equal(holder.identity.lang, 'node', 'an unauthenticated client reads who holds')
    const err = await denied(outsider.acquire({ timeoutMs: 10000 }), path, 'NoAuth')
    assert.match(err.message, /ACL of the lock path/)
    assert.equal(err.zookeeperCode, -102)
    await denied(outsider.acquire({ timeoutMs: 0 }), path, 'NoAuth')
    await denied(
      bob.lock(path, { acl: 'creatorAllWorldRead' }).withLock(async () => {}),
      path,
      'does not grant this client (digest user bob)',
    )
    assert.equal((await ephemeralsUnder(path)).length, 1, 'nothing of theirs was left')
    assert.equal(hold.state, 'held')
    assert.equal(hold.fencingToken, token)

    const second = alice2.lock(path, { acl: 'creatorAllWorldRead' })
    assert.equal(await second.acquire({ timeoutMs: 0 }), null, "alice's other client queues (a try: held)")
    const waiting = second.acquire()
    await nodesBecome(path, 2)
    await hold.release()
    const next = await waiting
    assert.equal((await ephemeralsUnder(path)).length, 1, "the owner's node went; the next one's holds")
    await next.release()
    await nodesBecome(path, 0)
  } finally {
    await Promise.all([alice, alice2, bob, anonymous].map((client) => client.close()))
  }
})

test('creatorAll hides even the queue', async () => {
  const path = uniquePath('acl-private')
  const alice = await Client.connect(ZK, { auth: ALICE })
  const anonymous = await Client.connect(ZK)
  try {
    const lock = alice.lock(path, { acl: 'creatorAll' })
    await lock.withLock(async () => {
      await denied(anonymous.lock(path).contenders(), path, 'listing the contenders')
      assert.equal((await lock.contenders()).length, 1)
    })
    await nodesBecome(path, 0)
  } finally {
    await Promise.all([alice.close(), anonymous.close()])
  }
})

test('the read/write lock is protected too', async () => {
  const path = uniquePath('acl-rwlock')
  const alice = await Client.connect(ZK, { auth: ALICE })
  const bob = await Client.connect(ZK, { auth: BOB })
  try {
    const rw = alice.readWriteLock(path, { acl: 'creatorAllWorldRead' })
    const reading = await rw.read.acquire()
    const bobRw = bob.readWriteLock(path, { acl: 'creatorAllWorldRead' })
    assert.deepEqual((await bobRw.holders()).map((p) => p.mode), ['read'])
    await denied(bobRw.write.acquire({ timeoutMs: 10000 }), path, 'digest user bob')
    await denied(bob.readWriteLock(path).read.acquire({ timeoutMs: 0 }), path, 'NoAuth')
    assert.equal((await ephemeralsUnder(path)).length, 1)
    await reading.release()
    await rw.write.withLock(async () => assert.equal((await ephemeralsUnder(path)).length, 1))
    await nodesBecome(path, 0)
  } finally {
    await Promise.all([alice.close(), bob.close()])
  }
})

test('a custom ACL names several users; a third cannot queue', async () => {
  const path = uniquePath('acl-custom')
  const acl = [
    // Each with ADMIN: only then does the server show a client the digest hashes it checks.
    { perms: perms.ALL, scheme: 'digest', id: digestId(ALICE) },
    { perms: perms.ALL, scheme: 'digest', id: digestId(BOB) },
    { perms: perms.READ, scheme: 'world', id: 'anyone' },
  ]
  const alice = await Client.connect(ZK, { auth: ALICE })
  const bob = await Client.connect(ZK, { auth: BOB })
  const carol = await Client.connect(ZK, { auth: 'carol:carol-secret' })
  try {
    const hold = await alice.lock(path, { acl }).acquire()
    const waiting = bob.lock(path, { acl }).acquire()
    await nodesBecome(path, 2)
    await denied(carol.lock(path).acquire({ timeoutMs: 0 }), path, 'NoAuth')
    await hold.release()
    await (await waiting).release()
    await nodesBecome(path, 0)
  } finally {
    await Promise.all([alice.close(), bob.close(), carol.close()])
  }
})

test('a lock path whose ACL grants more than asked is refused before anything is made under it', async () => {
  const path = uniquePath('acl-open-path')
  const anonymous = await Client.connect(ZK)
  const alice = await Client.connect(ZK, { auth: ALICE })
  try {
    const open = await anonymous.lock(path).acquire() // its path: an open container
    const err = await denied(alice.lock(path, { acl: 'creatorAllWorldRead' }).acquire(), path, 'world:anyone ALL')
    assert.match(err.message, /grants more than this lock's ACL \(CreatorAllWorldRead\) allows/)
    assert.equal((await ephemeralsUnder(path)).length, 1)
    await open.release()
  } finally {
    await Promise.all([alice.close(), anonymous.close()])
  }
})

test('bad acl options are refused at once, naming what was wrong', async () => {
  const path = uniquePath('acl-bad')
  const anonymous = await Client.connect(ZK)
  const alice = await Client.connect(ZK, { auth: ALICE })
  try {
    for (const acl of ['creatorAllWorldRead', 'creatorAll', [{ perms: perms.ALL, scheme: 'auth', id: '' }]]) {
      assert.throws(() => anonymous.lock(path, { acl }), { code: codes.INVALID_ARGUMENT, message: /digest auth/ })
      assert.throws(() => anonymous.readWriteLock(path, { acl }), { code: codes.INVALID_ARGUMENT, message: /digest auth/ })
    }
    const refused = [
      ['creator-all', /acl must be one of 'open', 'creatorAllWorldRead', 'creatorAll'/],
      [42, /acl must be a preset's name or an array/],
      [[null], /acl\[0\] must be \{ perms, scheme, id \}/],
      [[{ perms: 64, scheme: 'world', id: 'anyone' }], /acl\[0\]\.perms must be a combination of zklock\.perms/],
      [[{ perms: 1.5, scheme: 'world', id: 'anyone' }], /acl\[0\]\.perms/],
      [[{ perms: perms.ALL, scheme: 'world' }], /acl\[0\]\.scheme and \.id must be strings/],
      [[], /empty/],
      [[{ perms: perms.READ, scheme: 'world', id: 'anyone' }], /READ, CREATE and DELETE/],
      [[{ perms: 0, scheme: 'world', id: 'anyone' }], /grants no permission/],
      [[{ perms: perms.ALL, scheme: 'digest', id: 'nohash' }], /digest id/],
    ]
    for (const [acl, message] of refused) {
      assert.throws(() => alice.lock(path, { acl }), { code: codes.INVALID_ARGUMENT, message }, String(acl))
    }
    // 'open', spelled out, is the default open lock.
    await alice.lock(path, { acl: 'open' }).withLock(async () => {
      await anonymous.lock(path).withLock(async () => {}, { timeoutMs: 0 }).catch((error) => {
        assert.equal(error.code, codes.TIMEOUT, 'anyone may queue on an open lock')
      })
    })
    await nodesBecome(path, 0)
  } finally {
    await Promise.all([alice.close(), anonymous.close()])
  }
})

test('a semaphore takes the acl option: every node it makes gets it; others take no lease and change no max', async () => {
  const path = uniquePath('acl-semaphore')
  const countPath = `${path}-max/count` // its own parent, made with the ACL: nobody else may remake it
  const alice = await Client.connect(ZK, { auth: ALICE })
  const anonymous = await Client.connect(ZK)
  const raw = await rawZooKeeper()
  try {
    const options = { sharedCount: { path: countPath, seed: 2 }, acl: 'creatorAllWorldRead' }
    const leases = await alice.semaphore(path, options).acquire()
    const [lease] = leases.nodes
    for (const node of [path, `${path}/locks`, `${path}/leases`, lease, countPath]) {
      const acl = (await raw.getACL(node)).map(({ perms, scheme, id }) => `${scheme}:${id} ${perms}`).sort()
      // The server hides the digest hash from a client without ADMIN.
      assert.deepEqual(acl, [`digest:alice:x ${perms.ALL}`, `world:anyone ${perms.READ}`], node)
    }
    await assert.rejects(raw.setData(countPath, [0, 0, 0, 100]), /ZooKeeper error -102/, 'the max is not theirs to change')
    await assert.rejects(raw.delete(lease), /ZooKeeper error -102/, 'nor the lease to delete')
    const outsider = anonymous.semaphore(path, { maxLeases: 2 })
    await denied(outsider.acquire({ timeoutMs: 10000 }), `${path}/locks`, 'NoAuth')
    assert.equal((await ephemeralsUnder(`${path}/leases`)).length, 1, 'nothing of theirs was left')
    assert.equal(leases.state, 'held')
    await leases.release()
    assert.throws(
      () => anonymous.semaphore(path, { maxLeases: 2, acl: 'creatorAll' }),
      (err) => err.code === codes.INVALID_ARGUMENT && /digest auth/.test(err.message),
    )
  } finally {
    await raw.close()
    await anonymous.close()
    await alice.close()
  }
})

/** The zklock warnings `connect` emitted (process.emitWarning spied on; Node still prints them). */
async function connectWarnings(t, options) {
  const emit = t.mock.method(process, 'emitWarning')
  const client = await Client.connect(ZK, options)
  try {
    await client.lock(uniquePath('acl-warn')).acquire().then((hold) => hold.release())
  } finally {
    await client.close()
  }
  emit.mock.restore()
  return emit.mock.calls.map((call) => call.arguments).filter(([, opts]) => opts?.type === 'ZklockSecurityWarning')
}

test('digest auth without TLS warns once at connect; no auth, or SASL only, does not', async (t) => {
  const warned = await connectWarnings(t, { auth: ALICE })
  assert.equal(warned.length, 1, JSON.stringify(warned))
  const [[message, { code }]] = warned
  assert.equal(code, 'ZKLOCK_CLEARTEXT_PASSWORD')
  assert.match(message, /in clear.*TLS/)
  assert.ok(!message.includes('alice-secret'), message)
  assert.deepEqual(await connectWarnings(t, {}), [])
  const sasl = (process.env.ZK_SASL_USERS ?? '').split(',').filter(Boolean)[0] // scripts/zk run --sasl's
  if (sasl) {
    const [username, password] = sasl.split(/:(.*)/s, 2)
    assert.deepEqual(await connectWarnings(t, { sasl: { mechanism: 'DIGEST-MD5', username, password } }), [])
  }
})
