// SASL DIGEST-MD5 (the `sasl` option) against the test server, which `scripts/zk run --sasl`
// starts with a JAAS DigestLoginModule for the users of ZK_SASL_USERS: a lock held and released,
// a wrong password rejected at once with ZKLOCK_AUTH_FAILED (never showing it), a creator ACL
// that another user cannot pass, and bad options refused before any traffic, GSSAPI's too.
// (Kerberos against a real KDC: test/kerberos.test.mjs.)
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Client, codes } from 'zookeeper-lock'
import { ZK, uniquePath, handOver } from './helpers.mjs'

const USERS = Object.fromEntries((process.env.ZK_SASL_USERS ?? '').split(',').filter(Boolean).map((entry) => entry.split(/:(.*)/s, 2)))
const skip = USERS.alice ? false : 'the server authenticates no SASL users: run through scripts/test-node (scripts/zk run --sasl)'

const as = (user, password = USERS[user]) => ({ sasl: { mechanism: 'DIGEST-MD5', username: user, password } })

test('a lock is held and released over SASL DIGEST-MD5', { skip }, async () => {
  const path = uniquePath('sasl-lock')
  const alice = await Client.connect(ZK, as('alice'))
  const bob = await Client.connect(ZK, as('bob'))
  try {
    await handOver(alice, bob, path)
  } finally {
    await alice.close()
    await bob.close()
  }
})

test('a wrong password rejects at once with ZKLOCK_AUTH_FAILED, without the password', { skip }, async () => {
  const started = Date.now()
  const err = await Client.connect(ZK, { connectTimeoutMs: 10000, ...as('alice', 'not-alices-pw') }).then(
    () => assert.fail('connected with a wrong password'),
    (error) => error,
  )
  assert.equal(err.code, codes.AUTH_FAILED, String(err))
  assert.ok(Date.now() - started < 5000, 'rejected at once, not retried')
  assert.ok(err.message.includes('the server refused the SASL DIGEST-MD5 authentication'), err.message)
  assert.ok(!err.message.includes('not-alices-pw') && !String(err.stack).includes('not-alices-pw'))
})

test("a creator ACL keeps another SASL user out", { skip }, async () => {
  const path = uniquePath('sasl-acl')
  const alice = await Client.connect(ZK, as('alice'))
  const bob = await Client.connect(ZK, as('bob'))
  try {
    const hold = await alice.lock(path, { acl: 'creatorAll' }).acquire()
    for (const attempt of [bob.lock(path, { acl: 'creatorAll' }).acquire({ timeoutMs: 0 }), bob.lock(path).acquire({ timeoutMs: 5000 })]) {
      const err = await attempt.then(() => assert.fail('bob took it'), (error) => error)
      assert.equal(err.code, codes.PERMISSION_DENIED, String(err))
    }
    assert.equal(hold.state, 'held')
    await hold.release()
  } finally {
    await alice.close()
    await bob.close()
  }
})

test('bad sasl options are refused before any traffic, never quoting the password', async () => {
  const cases = [
    ['DIGEST-MD5', 'sasl must be an object'],
    [{ username: 'a', password: 'SECRET-PW' }, "sasl.mechanism must be 'DIGEST-MD5' or 'GSSAPI'"],
    [{ mechanism: 'DIGEST-MD5', username: 'a' }, 'needs username and password'],
    [{ mechanism: 'DIGEST-MD5', username: 'a', password: 12345 }, 'sasl.password must be a string'],
    [{ mechanism: 'DIGEST-MD5', username: '', password: 'SECRET-PW' }, 'username is empty'],
    [{ mechanism: 'DIGEST-MD5', username: 'a', password: 'SECRET-PW', principal: 'p' }, "unknown option 'principal'"],
    [{ mechanism: 'GSSAPI', serviceName: 'zookeeper' }, 'needs principal'],
    [{ mechanism: 'GSSAPI', principal: 'alice@R', keytab: '/nonexistent.keytab' }, 'cannot read the keytab'],
  ]
  for (const [sasl, words] of cases) {
    // A port nothing listens on: these fail before trying it.
    const err = await Client.connect('127.0.0.1:1', { sasl }).then(
      () => assert.fail('connected'),
      (error) => error,
    )
    assert.equal(err.code, codes.INVALID_ARGUMENT, String(err))
    assert.ok(err.message.includes(words), `${err.message} should say ${words}`)
    assert.ok(!err.message.includes('SECRET-PW') && !err.message.includes('12345'), err.message)
  }
})
