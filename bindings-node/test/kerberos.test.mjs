// SASL GSSAPI (Kerberos), `sasl: { mechanism: 'GSSAPI', principal, keytab }`, against the real MIT
// KDC and the Kerberos server that `scripts/zk run --kerberos` starts beside the suite's server
// (ZK_KRB5_CONNECT, the keytabs in ZK_KRB5_KEYTABS, KRB5_CONFIG): a lock held and released with
// keytabs, a creator ACL that another principal cannot pass, and a wrong principal rejected at
// once with ZKLOCK_AUTH_FAILED. Without that server these tests fail: scripts/test-node starts it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'

import { Client, codes } from 'zookeeper-lock'
import { uniquePath, handOver } from './helpers.mjs'

function env(name) {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set: run through scripts/test-node (scripts/zk run --kerberos)`)
  return value
}

const KRB5 = () => env('ZK_KRB5_CONNECT')
// The same server for handOver's `dump` observer, by address (it listens on 127.0.0.1, not ::1).
const observed = () => `127.0.0.1:${KRB5().split(':')[1]}`
const as = (name, keytabOf = name) => ({
  connectTimeoutMs: 10000,
  sasl: { mechanism: 'GSSAPI', principal: `${name}@ZKLOCK.TEST`, keytab: path.join(env('ZK_KRB5_KEYTABS'), `${keytabOf}.keytab`) },
})

test('a lock is held and released over Kerberos', async () => {
  const lockPath = uniquePath('krb-lock')
  const alice = await Client.connect(KRB5(), as('alice'))
  const bob = await Client.connect(KRB5(), as('bob'))
  try {
    await handOver(alice, bob, lockPath, observed())
  } finally {
    await alice.close()
    await bob.close()
  }
})

test('a creator ACL keeps another principal out', async () => {
  const lockPath = uniquePath('krb-acl')
  const alice = await Client.connect(KRB5(), as('alice'))
  const bob = await Client.connect(KRB5(), as('bob'))
  try {
    // World may read: bob can list the queue, so what refuses him is his own node, named.
    const hold = await alice.lock(lockPath, { acl: 'creatorAllWorldRead' }).acquire()
    const refused = (attempt) => attempt.then(() => assert.fail('bob took it'), (error) => error)
    let err = await refused(bob.lock(lockPath, { acl: 'creatorAllWorldRead' }).acquire({ timeoutMs: 0 }))
    assert.equal(err.code, codes.PERMISSION_DENIED, String(err))
    assert.ok(err.message.includes('SASL identity bob@ZKLOCK.TEST'), err.message)
    // Nor with an open lock on the path.
    err = await refused(bob.lock(lockPath).acquire({ timeoutMs: 5000 }))
    assert.equal(err.code, codes.PERMISSION_DENIED, String(err))
    assert.equal(hold.state, 'held')
    await hold.release()
  } finally {
    await alice.close()
    await bob.close()
  }
})

test('a wrong principal rejects at once with ZKLOCK_AUTH_FAILED', async () => {
  for (const [name, keytabOf, words] of [
    ['mallory', 'alice', 'could not get the credentials of mallory@ZKLOCK.TEST from the keytab'],
    ['gone', 'gone', 'not found in Kerberos database'],
  ]) {
    const started = Date.now()
    const err = await Client.connect(KRB5(), as(name, keytabOf)).then(
      () => assert.fail(`connected as ${name}`),
      (error) => error,
    )
    assert.equal(err.code, codes.AUTH_FAILED, String(err))
    assert.ok(err.message.includes(words), `${err.message} should say ${words}`)
    assert.ok(Date.now() - started < 5000, 'rejected at once, not retried')
  }
})
