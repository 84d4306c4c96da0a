// TLS from Node with tls.connect's names (`tls: { ca, cert, key, passphrase, rejectUnauthorized,
// servername }`), against a real ZooKeeper serving TLS with client certificates required,
// started for this file by `scripts/zk run --tls`: a lock held and released over mutual TLS
// (PEM as Buffers and strings), seen from the server's plaintext port; an encrypted key with its
// passphrase; each refused handshake naming its cause; servername and rejectUnauthorized: false;
// bad options refused before any network traffic; no secret in errors or lock nodes.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import path from 'node:path'

import { Client, codes } from 'zookeeper-lock'
import { REPO, uniquePath, nodesBecome } from './helpers.mjs'

let server, plain, connect, dir

before(async () => {
  const env = { ...process.env }
  for (const name of ['ZK_CONNECT', 'ZK_TLS_CONNECT', 'ZK_TLS_DIR']) delete env[name]
  server = spawn(path.join(REPO, 'scripts/zk'), ['run', '--tls', '--', 'sh', '-c', 'echo "$ZK_CONNECT $ZK_TLS_CONNECT $ZK_TLS_DIR"; exec cat >/dev/null'], {
    env,
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const [line] = await createInterface({ input: server.stdout })[Symbol.asyncIterator]().next().then((r) => [r.value])
  ;[plain, connect, dir] = (line ?? '').split(' ')
  assert.ok(dir, `scripts/zk run --tls said ${JSON.stringify(line)}`)
})

after(async () => {
  const exited = new Promise((resolve) => server.once('exit', resolve))
  server.stdin.end() // the `cat` ends, and scripts/zk stops the server
  await exited
})

const file = (name) => readFileSync(path.join(dir, name))
const port = () => connect.split(',')[0].split(':')[1]
/** Mutual TLS as alice, verified against the test CA; PEM as Buffers. */
const alice = (extra = {}) => ({ ca: file('ca.pem'), cert: file('alice.pem'), key: file('alice.key'), ...extra })

// ZKLOCK_AUTH_FAILED naming `cause`, at once: every server refused the handshake for that
// certificate reason, which the connect timeout (10 s here) would not change (before:
// ZKLOCK_TIMEOUT after it).
async function refused(hosts, tls, cause) {
  const started = performance.now()
  const err = await Client.connect(hosts, { connectTimeoutMs: 10000, tls }).then(
    (client) => client.close().then(() => assert.fail('connected')),
    (error) => error,
  )
  assert.equal(err.code, codes.AUTH_FAILED, String(err))
  assert.ok(performance.now() - started < 5000, `refused at once, not after the connect timeout: ${err}`)
  assert.ok(err.message.includes(cause), err.message)
}

/** Rejected with ZKLOCK_INVALID_ARGUMENT before any traffic (nothing listens on localhost:1). */
// The core's message for TLS with verification on and no CA bundle.
const NO_CA = "TLS options: no CA bundle to verify the servers' certificates against (turning certificate verification off instead is for tests only)"

async function invalid(tls, words) {
  const started = Date.now()
  const err = await Client.connect('localhost:1', { tls }).then(
    () => assert.fail('connected'),
    (error) => error,
  )
  assert.equal(err.code, codes.INVALID_ARGUMENT, String(err))
  assert.ok(err.message.includes(words), err.message)
  assert.ok(Date.now() - started < 2000, 'refused before any network traffic')
  return err
}

test('a lock is held and released over mutual TLS, seen from the plaintext port', async () => {
  const lockPath = uniquePath('tls-lock')
  const client = await Client.connect(connect, { tls: alice() })
  const other = await Client.connect(connect, { tls: alice({ ca: file('ca.pem').toString(), cert: [file('alice.pem')] }) })
  try {
    const hold = await client.lock(lockPath).acquire()
    await nodesBecome(lockPath, 1, 10000, plain)
    assert.equal(await other.lock(lockPath).acquire({ timeoutMs: 0 }), null, 'held by the first client')
    await hold.release()
    await nodesBecome(lockPath, 0, 10000, plain)
  } finally {
    await client.close()
    await other.close()
  }
})

test('digest auth over TLS does not warn (without TLS it does: acl.test.mjs)', async (t) => {
  const emit = t.mock.method(process, 'emitWarning')
  const client = await Client.connect(connect, { auth: 'alice:alice-secret', tls: alice() })
  await client.close()
  assert.deepEqual(emit.mock.calls.filter((call) => call.arguments[1]?.type === 'ZklockSecurityWarning'), [])
})

test('an encrypted key with its passphrase; a wrong one or none is refused, never shown', async () => {
  const passphrase = file('alice-encrypted.password').toString().split('\n')[0]
  const tls = alice({ key: file('alice-encrypted.key'), passphrase })
  const client = await Client.connect(connect, { tls })
  try {
    const lock = client.lock(uniquePath('tls-encrypted-key'))
    await lock.withLock(async () => {
      const [holder] = await lock.contenders()
      const shown = JSON.stringify(holder, (_, value) => (typeof value === 'bigint' ? String(value) : value))
      assert.equal(holder.identity.lang, 'node')
      assert.ok(!shown.includes(passphrase) && !shown.includes('PRIVATE'), shown)
    })
  } finally {
    await client.close()
  }
  const err = await invalid({ ...tls, passphrase: 'not-the-passphrase' }, 'client private key could not be decrypted')
  assert.ok(!`${err.message} ${err.stack} ${JSON.stringify(err)}`.includes('not-the-passphrase'))
  await invalid({ ...tls, passphrase: undefined }, 'is encrypted and no password is given')
})

test('refused handshakes name their cause', async () => {
  const byAddress = `127.0.0.1:${port()}`
  await refused(connect, alice({ ca: file('other-ca.pem') }), 'not signed by a trusted CA')
  await refused(byAddress, alice(), 'does not name the host 127.0.0.1 (name mismatch: it names localhost)')
  await refused(connect, { ca: file('ca.pem') }, 'requires a client certificate and none is configured')
  await refused(byAddress, alice({ servername: 'zk.example.com' }), 'does not name the host zk.example.com')
})

test('servername verifies another name; rejectUnauthorized: false verifies nothing', async () => {
  const byAddress = `127.0.0.1:${port()}`
  const named = await Client.connect(byAddress, { tls: alice({ servername: 'localhost' }) })
  assert.equal(named.state, 'connected')
  await named.close()
  const unverified = await Client.connect(byAddress, { tls: alice({ ca: undefined, rejectUnauthorized: false }) })
  try {
    await unverified.lock(uniquePath('tls-unverified')).withLock(async () => {})
  } finally {
    await unverified.close()
  }
})

test('bad tls options are refused before any network traffic', async () => {
  await invalid(alice({ pfx: 'x' }), "unknown option 'pfx'")
  // No CA with verification on: the core's words, as every language reports them
  // (bindings-python/tests/test_tls.py says the same).
  const noCa = await invalid({ cert: file('alice.pem'), key: file('alice.key') }, 'no CA bundle')
  assert.equal(noCa.message, `invalid argument on localhost:1: ${NO_CA}`)
  await invalid({ rejectUnauthorized: true }, NO_CA)
  await invalid(alice({ key: [file('alice.key')] }), 'tls.key must be PEM as a string or a Buffer')
  await invalid(alice({ rejectUnauthorized: 'no' }), 'tls.rejectUnauthorized must be a boolean')
  await invalid(alice({ key: undefined }), 'needs its private key')
  const err = await invalid(alice({ ca: file('alice.key') }), 'no usable PEM certificate')
  assert.ok(!err.message.includes('PRIVATE'), err.message)
  await invalid(alice({ servername: 'not a host' }), 'no valid host name')
})

test('an X.509 v1 client certificate is presented; the server knows it by its subject', async () => {
  // carol.pem is X.509 v1 (no extensions): what `openssl x509 -req` makes by default.
  const carol = await Client.connect(connect, { tls: alice({ cert: file('carol.pem'), key: file('carol.key') }) })
  const other = await Client.connect(connect, { tls: alice() })
  try {
    const p = uniquePath('tls-x509-v1')
    const hold = await carol.lock(p, { acl: 'creatorAll' }).acquire()
    await assert.rejects(other.lock(p, { acl: 'creatorAll' }).acquire({ timeoutMs: 5000 }), (err) => err.code === codes.PERMISSION_DENIED)
    await hold.release()
  } finally {
    await carol.close()
    await other.close()
  }
})
