'use strict'
// zklock for Node: the JavaScript layer over the native addon (zklock.node, built by build.mjs).
// The addon runs the Rust core, whose owner table says who holds what; this layer validates
// arguments, names owners (each async flow is one, through AsyncLocalStorage) and shapes holds,
// signals and errors.

const { AsyncLocalStorage } = require('node:async_hooks')
const { threadId } = require('node:worker_threads')

// The addon: the prebuilt one for this platform that a published package carries
// (zklock.<platform>-<arch>[-gnu|-musl].node, napi-rs's naming), or else the one `npm run build`
// made in a source checkout (zklock.node).
function platformName() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`
}
const PLATFORM = platformName()
function loadNative() {
  const { existsSync } = require('node:fs')
  const path = require('node:path')
  for (const file of [`zklock.${PLATFORM}.node`, 'zklock.node']) {
    if (existsSync(path.join(__dirname, file))) return require(`./${file}`)
  }
  // The published package carries one prebuilt addon, for Linux x86_64 with glibc 2.17 or newer.
  const what = PLATFORM.endsWith('-musl')
    ? `no prebuilt addon for musl libc (Alpine and the like, ${PLATFORM})`
    : `no prebuilt addon for ${PLATFORM}`
  throw new Error(
    `zookeeper-lock: ${what} in ${__dirname}: this package carries only zklock.linux-x64-gnu.node, for Linux x86_64 ` +
      'with glibc 2.17 or newer. Build the addon from source, with a Rust toolchain: in a checkout of the ' +
      'zklock repository, `npm run build` in bindings-node, then `npm install ./bindings-node`',
  )
}
const native = loadNative()
// Owner labels (in messages and lock nodes) name the worker thread as well as the async flow.
native.setThreadId(threadId)
// The reentrant fast path: plain Node-API functions of numbers (see `fast_path` in src/lock.rs).
const fast = native.fastPath()
// What a nested release resolves to: one settled promise, shared, rather than a new one a call.
const RESOLVED = Promise.resolve()

/** The `code` of every error zklock rejects with, one per kind of the core's errors. */
const codes = Object.freeze({
  INVALID_ARGUMENT: 'ZKLOCK_INVALID_ARGUMENT',
  TIMEOUT: 'ZKLOCK_TIMEOUT',
  NOT_OWNER: 'ZKLOCK_NOT_OWNER',
  SESSION_EXPIRED: 'ZKLOCK_SESSION_EXPIRED',
  LOCK_LOST: 'ZKLOCK_LOCK_LOST',
  CONNECTION_LOSS: 'ZKLOCK_CONNECTION_LOSS',
  AUTH_FAILED: 'ZKLOCK_AUTH_FAILED',
  CLOSED: 'ZKLOCK_CLOSED',
  ZOOKEEPER: 'ZKLOCK_ZOOKEEPER',
  DEADLOCK: 'ZKLOCK_DEADLOCK',
  PERMISSION_DENIED: 'ZKLOCK_PERMISSION_DENIED',
})

/** Permission bits of custom ACL entries, as ZooKeeper numbers them. */
const perms = Object.freeze({ READ: 1, WRITE: 2, CREATE: 4, DELETE: 8, ADMIN: 16, ALL: 31 })
const ACL_PRESETS = ['open', 'creatorAllWorldRead', 'creatorAll']

// The native side maps the core's errors to these codes (src/error.rs); the few errors this
// layer raises itself (bad arguments, a withLock that timed out, a hold released twice, a lost
// hold's signal) are made here, with the same codes.
/**
 * Every error zklock raises (but AbortError, shaped as Node's own): `code` is one of `codes`;
 * `path`, `zookeeperCode` and `lostReason` are set when known.
 */
class ZkLockError extends Error {
  constructor(message, code, { path, zookeeperCode, lostReason } = {}) {
    super(message)
    this.code = code
    this.path = path
    this.zookeeperCode = zookeeperCode
    this.lostReason = lostReason
  }
}
Object.defineProperty(ZkLockError.prototype, 'name', { value: 'ZkLockError', writable: true, configurable: true })
native.setErrorClass(ZkLockError)

function zklockError(code, message, path) {
  return new ZkLockError(path === undefined ? message : `${message} (lock ${path})`, code, { path })
}

function invalid(message) {
  return zklockError(codes.INVALID_ARGUMENT, message)
}

/** Rejection of an operation whose AbortSignal fired, shaped as Node's own AbortError. */
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options)
    this.name = 'AbortError'
    this.code = 'ABORT_ERR'
  }
}

function abortError(signal) {
  return new AbortError('The lock acquisition was aborted', { cause: signal.reason })
}

// A native call's promise, whose rejection carries the stack of the caller's call site (errors
// made on the runtime have no JavaScript frames). `callSite` is captured synchronously, at the
// call, and formatted only if the promise rejects.
function fromCaller(promise, callSite) {
  return promise.catch((error) => {
    throw atCaller(error, callSite)
  })
}

// The same for an error a native call threw synchronously (a re-entry refused): its own stack
// would start inside this layer.
function atCaller(error, callSite) {
  if (error !== null && typeof error === 'object' && 'code' in error) {
    const frames = callSite.stack.slice(callSite.stack.indexOf('\n'))
    error.stack = `${error.name}: ${error.message}${frames}`
  }
  return error
}

// An error made on the runtime, for a call that awaited it: this point's stack, whose async
// frames lead to the caller's line. Taken only on failure: capturing the call site at each
// call cost a waiting acquisition more memory than the rest of it.
function restacked(error) {
  if (error !== null && typeof error === 'object' && 'code' in error && Object.isExtensible(error)) {
    Error.captureStackTrace(error, restacked)
  }
  return error
}

// `restacked` as a promise's rejection handler.
function rejectRestacked(error) {
  throw restacked(error)
}

function callSiteOf(fn) {
  const callSite = {}
  Error.captureStackTrace(callSite, fn)
  return callSite
}

// One 'abort' listener per signal, whatever the number of acquisitions sharing it: more than
// ten listeners on one signal make Node warn (MaxListenersExceededWarning).
const abortWatchers = new WeakMap()

function onAbort(signal, callback) {
  let watcher = abortWatchers.get(signal)
  if (watcher === undefined) {
    const callbacks = new Set()
    const listener = () => {
      abortWatchers.delete(signal)
      for (const each of callbacks) each()
    }
    watcher = { callbacks, listener }
    abortWatchers.set(signal, watcher)
    signal.addEventListener('abort', listener, { once: true })
  }
  const { callbacks, listener } = watcher
  callbacks.add(callback)
  return () => {
    callbacks.delete(callback)
    if (callbacks.size === 0 && abortWatchers.get(signal) === watcher) {
      abortWatchers.delete(signal)
      signal.removeEventListener('abort', listener)
    }
  }
}

// ----------------------------------------------------------------------------- validation

const MAX_TIMEOUT_MS = 2 ** 31 - 1 // as setTimeout's: about 24.8 days
const ACQUIRE_OPTIONS = Object.freeze(['timeoutMs', 'signal'])

function checkOptions(options, allowed, what) {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`${what}: options must be an object, got ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) {
      throw invalid(`${what}: unknown option '${key}' (known: ${allowed.join(', ')})`)
    }
  }
  return options
}

function checkMs(value, name, { min, fallback }) {
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMEOUT_MS) {
    throw invalid(`${name} must be an integer number of milliseconds from ${min} to ${MAX_TIMEOUT_MS}, got ${describe(value)}`)
  }
  return value
}

// How long an acquisition may wait: left out (undefined or null) or Infinity waits as long as it
// takes (undefined to the native side), 0 only tries, else that many milliseconds. Negative values
// are refused, -1 included (C's and Python's spelling of forever): a remaining time computed in
// milliseconds reaches -1 when it is 1 ms late, and must not turn into a wait for ever.
function checkWaitMs(value, name) {
  if (value === undefined || value === null || value === Infinity) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIMEOUT_MS) {
    throw invalid(
      `${name} must be an integer number of milliseconds from 0 (only try) to ${MAX_TIMEOUT_MS}, or Infinity (or left out) to wait as long as it takes, got ${describe(value)}`,
    )
  }
  return value
}

// The servers' packet limit (jute.maxbuffer): what a lock request needs, up to 32 bits.
function checkBytes(value, name) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1024 || value > 2 ** 32 - 1) {
    throw invalid(`${name} must be an integer number of bytes from 1024 to ${2 ** 32 - 1}, got ${describe(value)}`)
  }
  return value
}

// A count of leases (n, or a max): the core refuses 0 with its own message, the same in every
// language; this only checks that it is a whole number a u32 holds.
function checkCount(value, name, { fallback }) {
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 2 ** 32 - 1) {
    throw invalid(`${name} must be an integer from 1 to ${2 ** 32 - 1}, got ${describe(value)}`)
  }
  return value
}

function checkString(value, name, { optional = false } = {}) {
  if (optional && (value === undefined || value === null)) return undefined
  if (typeof value !== 'string' || value.length === 0) {
    throw invalid(`${name} must be a non-empty string, got ${describe(value)}`)
  }
  return value
}

// The `sasl` option as the addon takes it: { mechanism, username, password } (DIGEST-MD5) or
// { mechanism, principal, keytab, credentialCache, serviceName, host } (GSSAPI). The core checks
// what the values mean; no message here shows the password.
const SASL_KEYS = {
  'DIGEST-MD5': ['mechanism', 'username', 'password'],
  GSSAPI: ['mechanism', 'principal', 'keytab', 'credentialCache', 'serviceName', 'host']
}
function checkSasl(sasl) {
  if (sasl === undefined || sasl === null) return undefined
  if (typeof sasl !== 'object' || Array.isArray(sasl)) {
    throw invalid(`sasl must be an object such as { mechanism: 'DIGEST-MD5', username, password }, got ${describe(sasl)}`)
  }
  const mechanism = typeof sasl.mechanism === 'string' ? sasl.mechanism.toUpperCase() : sasl.mechanism
  const keys = SASL_KEYS[mechanism]
  if (keys === undefined) {
    throw invalid(`sasl.mechanism must be 'DIGEST-MD5' or 'GSSAPI', got ${describe(sasl.mechanism)}`)
  }
  checkOptions(sasl, keys, `sasl (${mechanism})`)
  const config = { mechanism }
  for (const key of keys.slice(1)) {
    const value = sasl[key]
    if (value === undefined || value === null) continue
    if (typeof value !== 'string') throw invalid(`sasl.${key} must be a string`)
    config[key] = value
  }
  const needed = mechanism === 'GSSAPI' ? ['principal'] : ['username', 'password']
  for (const key of needed) {
    if (config[key] === undefined) throw invalid(`sasl (${mechanism}) needs ${needed.join(' and ')}`)
  }
  return config
}

// A lock's `acl` option as the addon takes it: [preset name, custom entries]. The core checks
// what an ACL means (credentials for a creator preset, ids of each scheme) and says what is wrong.
function checkAcl(acl) {
  if (acl === undefined || acl === null) return [undefined, undefined]
  if (typeof acl === 'string') {
    if (!ACL_PRESETS.includes(acl)) {
      throw invalid(`acl must be one of ${ACL_PRESETS.map((p) => `'${p}'`).join(', ')} or an array of entries, got ${describe(acl)}`)
    }
    return [acl, undefined]
  }
  if (!Array.isArray(acl)) {
    throw invalid(`acl must be a preset's name or an array of { perms, scheme, id } entries, got ${describe(acl)}`)
  }
  const entries = acl.map((entry, i) => {
    if (entry === null || typeof entry !== 'object') throw invalid(`acl[${i}] must be { perms, scheme, id }, got ${describe(entry)}`)
    const { perms: bits, scheme, id } = entry
    if (typeof bits !== 'number' || !Number.isInteger(bits) || bits < 0 || bits > perms.ALL) {
      throw invalid(`acl[${i}].perms must be a combination of zklock.perms (0 to ${perms.ALL}), got ${describe(bits)}`)
    }
    if (typeof scheme !== 'string' || typeof id !== 'string') {
      throw invalid(`acl[${i}].scheme and .id must be strings, got ${describe(scheme)} and ${describe(id)}`)
    }
    return { perms: bits, scheme, id }
  })
  return [undefined, entries]
}

// The `tls` option, as Node's tls.connect names its fields: PEM contents as strings or Buffers
// (arrays of them for `ca` and `cert`). The core checks what they hold.
const TLS_OPTIONS = ['ca', 'cert', 'key', 'passphrase', 'rejectUnauthorized', 'servername']
function checkTls(tls) {
  if (tls === undefined || tls === null) return undefined
  const opts = checkOptions(tls, TLS_OPTIONS, 'Client.connect: tls')
  const pem = (value, name, { many }) => {
    if (value === undefined || value === null) return undefined
    if (many && Array.isArray(value)) return value.map((item, i) => pem(item, `${name}[${i}]`, { many: false })).join('\n')
    if (typeof value === 'string') return value
    if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
    throw invalid(`tls.${name} must be PEM as a string or a Buffer${many ? ' (or an array of them)' : ''}, got ${describe(value)}`)
  }
  const rejectUnauthorized = opts.rejectUnauthorized ?? true
  if (typeof rejectUnauthorized !== 'boolean') {
    throw invalid(`tls.rejectUnauthorized must be a boolean, got ${describe(rejectUnauthorized)}`)
  }
  const ca = pem(opts.ca, 'ca', { many: true })
  if (ca === undefined && rejectUnauthorized) {
    throw invalid("tls.ca is required: zklock verifies the servers' certificates against it, not Node's built-in CAs (rejectUnauthorized: false verifies nothing, for tests only)")
  }
  return {
    ca,
    cert: pem(opts.cert, 'cert', { many: true }),
    key: pem(opts.key, 'key', { many: false }),
    passphrase: checkString(opts.passphrase, 'tls.passphrase', { optional: true }),
    rejectUnauthorized,
    servername: checkString(opts.servername, 'tls.servername', { optional: true }),
  }
}

function checkSignal(signal) {
  if (signal === undefined || signal === null) return undefined
  if (!(signal instanceof AbortSignal)) throw invalid(`signal must be an AbortSignal, got ${describe(signal)}`)
  return signal
}

// The native lock's arguments for `client.lock` and `client.readWriteLock` (named by `what`).
function lockArguments(path, options, what) {
  checkString(path, 'path')
  const opts = checkOptions(options, ['identifier', 'acl'], what)
  const identifier = checkString(opts.identifier, 'identifier', { optional: true })
  const [acl, aclEntries] = checkAcl(opts.acl)
  return [path, identifier, acl, aclEntries]
}

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return `${typeof value} ${value}`
  if (typeof value === 'function') return 'a function'
  return typeof value === 'object' ? `an object (${value.constructor?.name ?? 'null prototype'})` : typeof value
}

// ----------------------------------------------------------------------------- client

let exitHooked = false

// A script that forgets close() still ends its sessions when it exits, rather than leaving its
// lock nodes to the session timeout. 'exit' also fires for process.exit(), which skips the
// addon's own environment cleanup hook. The listener does not keep the process alive.
function closeSessionsAtExit() {
  if (exitHooked) return
  exitHooked = true
  process.once('exit', () => native.closeSessionsAtExit())
}

const CONSTRUCT = Symbol('zklock.construct')

class Client {
  #native
  #listeners = new Set()
  #stateWatch = null
  #lastState = undefined
  // The signals of this client's holds that may still abort (see Hold#signal).
  #signals = new Set()

  /** Use `Client.connect(hosts, options)`. */
  constructor(token, nativeClient) {
    if (token !== CONSTRUCT) throw invalid('use `await Client.connect(hosts, options)` to make a Client')
    this.#native = nativeClient
  }

  /**
   * Connects to `hosts` (`host:port[,host:port...][/chroot]`) and establishes a session.
   * Options: `sessionTimeoutMs`, `connectTimeoutMs` (left out: the core's defaults, 10000), `auth`
   * (digest credentials, `"user:password"`; without `tls` the password crosses the network in
   * clear, so connecting emits a `ZklockSecurityWarning`, code `ZKLOCK_CLEARTEXT_PASSWORD`), `sasl` (SASL DIGEST-MD5 or Kerberos, see
   * index.d.ts), `tls` (`{ ca, cert, key, passphrase, rejectUnauthorized, servername }` as
   * `tls.connect` names them).
   */
  static async connect(hosts, options) {
    const callSite = callSiteOf(Client.connect)
    checkString(hosts, 'hosts')
    const opts = checkOptions(options, ['sessionTimeoutMs', 'connectTimeoutMs', 'auth', 'juteMaxbuffer', 'sasl', 'tls'], 'Client.connect')
    // Left out, they stay undefined: the core fills in its defaults.
    const sessionTimeoutMs = checkMs(opts.sessionTimeoutMs, 'sessionTimeoutMs', { min: 1, fallback: undefined })
    const connectTimeoutMs = checkMs(opts.connectTimeoutMs, 'connectTimeoutMs', { min: 1, fallback: undefined })
    // The core rejects an auth without a colon, before any network traffic.
    const auth = checkString(opts.auth, 'auth', { optional: true })
    const juteMaxbuffer = checkBytes(opts.juteMaxbuffer, 'juteMaxbuffer')
    const sasl = checkSasl(opts.sasl)
    const tls = checkTls(opts.tls)
    const connecting = native.connect(hosts, sessionTimeoutMs, connectTimeoutMs, auth, juteMaxbuffer, sasl, tls)
    const client = new Client(CONSTRUCT, await fromCaller(connecting, callSite))
    closeSessionsAtExit()
    // Once per client, when connected (only then was the password sent); Node prints it unless
    // --no-warnings, and process.on('warning') sees it.
    for (const { code, message } of client.#native.connectWarnings) {
      process.emitWarning(message, { type: 'ZklockSecurityWarning', code })
    }
    return client
  }

  /** `'connected'`, `'disconnected'`, `'expired'`, `'authFailed'` or `'closed'`. */
  get state() {
    return this.#native.state
  }

  /** The session timeout the server granted, in ms (between sessions, the one asked for). */
  get sessionTimeoutMs() {
    return this.#native.sessionTimeoutMs
  }

  /**
   * Calls `listener(state)` on each change of the session state; returns a function that stops
   * it. Listening never keeps the process alive.
   */
  onStateChange(listener) {
    if (typeof listener !== 'function') throw invalid(`listener must be a function, got ${describe(listener)}`)
    this.#listeners.add(listener)
    if (this.#stateWatch === null) this.#stateWatch = this.#native.watchState((state) => this.#dispatch(state))
    return () => {
      this.#listeners.delete(listener)
      if (this.#listeners.size === 0 && this.#stateWatch !== null) {
        this.#stateWatch.stop()
        this.#stateWatch = null
      }
    }
  }

  #dispatch(state) {
    if (state === this.#lastState) return
    this.#lastState = state
    for (const listener of [...this.#listeners]) {
      try {
        listener(state)
      } catch (error) {
        // As an EventEmitter would: the error surfaces, and the other listeners still run.
        queueMicrotask(() => {
          throw error
        })
      }
    }
  }

  /**
   * A fair, reentrant lock on `path` (relative to the chroot). Options: `identifier`, recorded
   * in each lock node; `acl`, who may queue for, delete in and read the lock ('open', the
   * default; 'creatorAllWorldRead'; 'creatorAll'; or `{ perms, scheme, id }` entries). Nothing
   * is sent to ZooKeeper until the first acquisition.
   */
  lock(path, options) {
    return new Lock(CONSTRUCT, this.#native.lock(...lockArguments(path, options, 'client.lock')), this.#signals)
  }

  /**
   * A fair read/write lock on `path` (Curator's InterProcessReadWriteLock): `read` and `write`
   * are Locks. Options: `identifier`, `acl` (as for `lock`). Nothing is sent to ZooKeeper until
   * the first acquisition.
   */
  readWriteLock(path, options) {
    const nativeLock = this.#native.readWriteLock(...lockArguments(path, options, 'client.readWriteLock'))
    return new ReadWriteLock(CONSTRUCT, nativeLock, this.#signals)
  }

  /**
   * A counting semaphore on `path` (Curator's InterProcessSemaphoreV2): at most `maxLeases`
   * leases at once, or as many as the shared count at `sharedCount.path` says (a 4-byte int, as
   * Curator's SharedCount stores it; made with `sharedCount.seed` if missing). Options
   * `identifier` and `acl`, as for `lock`: the ACL is given to every node the semaphore makes
   * (default 'open', as Curator's). Nothing is sent to ZooKeeper until the first acquisition.
   */
  semaphore(path, options) {
    checkString(path, 'path')
    const opts = checkOptions(options, ['maxLeases', 'sharedCount', 'identifier', 'acl'], 'client.semaphore')
    const identifier = checkString(opts.identifier, 'identifier', { optional: true })
    const [acl, aclEntries] = checkAcl(opts.acl)
    const maxLeases = checkCount(opts.maxLeases, 'maxLeases', { fallback: undefined })
    let countPath, seed
    if (opts.sharedCount !== undefined && opts.sharedCount !== null) {
      const count = checkOptions(opts.sharedCount, ['path', 'seed'], 'client.semaphore: sharedCount')
      countPath = checkString(count.path, 'sharedCount.path')
      seed = checkCount(count.seed, 'sharedCount.seed', { fallback: undefined })
      if (seed === undefined) throw invalid('sharedCount.seed is required: the count if its node must be made')
    }
    if ((maxLeases === undefined) === (countPath === undefined)) {
      throw invalid(`client.semaphore needs exactly one of maxLeases and sharedCount, got ${maxLeases === undefined ? 'neither' : 'both'}`)
    }
    const nativeSemaphore = this.#native.semaphore(path, maxLeases, countPath, seed, identifier, acl, aclEntries)
    return new Semaphore(CONSTRUCT, nativeSemaphore, this.#signals)
  }

  /**
   * Several locks taken together, all or none (Curator's InterProcessMultiLock, without its
   * deadlock): `members` are Locks (mutexes, or the `read` or `write` side of a ReadWriteLock)
   * and `{ semaphore, leases }` (n leases of a Semaphore, default 1). They are taken in one
   * canonical order (by path, then kind) whatever the order given, under one deadline.
   */
  multiLock(members) {
    if (!Array.isArray(members)) throw invalid(`client.multiLock needs an array of members, got ${describe(members)}`)
    const builder = new native.NativeMultiLockBuilder()
    const locks = []
    members.forEach((member, i) => {
      if (member instanceof Lock) {
        builder.addLock(nativeOfLock(member))
        locks.push(member)
      } else if (member instanceof ReadWriteLock) {
        throw invalid(`members[${i}] is a ReadWriteLock: give its read or write side`)
      } else if (member !== null && typeof member === 'object' && member.semaphore instanceof Semaphore) {
        const opts = checkOptions(member, ['semaphore', 'leases'], `client.multiLock: members[${i}]`)
        builder.addLeases(nativeOfSemaphore(opts.semaphore), checkCount(opts.leases, `members[${i}].leases`, { fallback: 1 }))
      } else {
        throw invalid(`members[${i}] must be a Lock or { semaphore, leases }, got ${describe(member)}`)
      }
    })
    return new MultiLock(CONSTRUCT, builder.build(), locks, this.#signals)
  }

  /** Ends the session at once: its lock nodes go, pending acquisitions reject. Idempotent. */
  async close() {
    await fromCaller(this.#native.close(), callSiteOf(this.close))
    // The native notifications of the loss and of 'closed' are on their way, but they do not
    // keep the process alive: deliver them now, so that code awaiting them after close() runs
    // (their late twins are no-ops).
    for (const entry of this.#signals) entry.abortIfLost()
    this.#signals.clear()
    if (this.#listeners.size > 0) this.#dispatch('closed')
  }
}

// ----------------------------------------------------------------------------- lock

// Owner ids name async flows (made by the core: native.newOwner()); the native side keys
// reentrancy counts by them.
//
// Which owner the current flow is, per lock, is one module-wide AsyncLocalStorage's: its store is
// a chain of { table, owner, up } links, `table` a core owner table's id (shared by every Lock of
// the client on the path and by both sides of a read/write lock), the innermost link of a table
// the flow's owner there. One storage, not one per Lock: Node (20; 22 by default) keeps every
// storage whose run() was ever called in a process-wide list, even once its Lock is collected,
// and every new promise of the process walks that list.
//
// Even one enabled storage makes every promise of the process cost about three times as much, so
// it is enabled only while a flow it names may still matter: while an owner that ran code through
// it (withLock, hold.run, multiHold.run) still holds something. Once none does, it is disabled,
// and the stores left on old async resources name owners that hold nothing and never will again
// (owner ids are not reused, and only a holder re-enters): the core's owner table, asked at each
// use, ignores them.
const flows = new AsyncLocalStorage()
// The owners that ran code through `flows` and may still hold, each with the native locks
// (tables) it ran for.
const running = new Map()

// The current flow's owner for owner table `table`, or undefined.
function ownerIn(table) {
  for (let link = flows.getStore(); link !== undefined; link = link.up) {
    if (link.table === table) return link.owner
  }
  return undefined
}

// Runs fn(...args) with the current flow the owner `owner` of `nativeLock`'s table. An owner
// that holds nothing there (a hold's run() after its release) is not recorded as running: no
// release will come to take it out (the storage stays enabled until the next owner that ran is
// done).
function runOwning(lock, nativeLock, table, owner, fn, args, holding = true) {
  if (holding) {
    let natives = running.get(owner)
    if (natives === undefined) running.set(owner, (natives = new Set()))
    natives.add(nativeLock)
  }
  const up = flows.getStore()
  const link = up !== undefined && up.table === table && up.owner === owner ? up : { table, owner, up, lock }
  return flows.run(link, fn, ...args)
}

// After a release by `owner`: once it holds nothing it ran code for, it is no longer running,
// and once no owner is, the storage is disabled (see above).
function maybeDone(owner) {
  const natives = running.get(owner)
  if (natives === undefined) return
  for (const nativeLock of natives) {
    if (nativeLock.holdsEitherSide(owner)) return
  }
  running.delete(owner)
  if (running.size === 0) flows.disable()
}

// What Hold needs of its Lock, kept out of reach of users (no underscore methods to call):
// assigned in Lock's static block, where its private fields are in scope.
let runAs, runAsIfHolding, releaseOwner, signalsOfClient, nativeOfLock, holdingOwner

class Lock {
  #native
  #key
  #path
  #mode
  // A memo of native hold handles by owner, so that a re-entry makes no native object (that
  // costs more than the re-entry): it decides nothing, as the core's owner table says who holds
  // what and each entry is used only while its id is the hold the core names. Pruned at each
  // owner's last release. The owner that acquired last is kept in fields, others (holding at the
  // same time) in a map: an entry added and deleted at each handoff of a long queue reallocated
  // the map's table each time, referenced from this old object, so every one outlived V8's young
  // collections (152 bytes a handoff, feeding the growth of its young generation).
  #lastOwner = undefined
  #lastId = 0
  #lastHold = null
  #others = null
  // The core's owner table (see `ownerIn`): shared by the lock objects of the path and by both
  // sides of a read/write lock (a flow must be one owner on both for the downgrade).
  #table
  // The client's set of hold signals that may still abort.
  #signals

  static {
    // Runs fn(...args) as `owner`: it and everything it starts re-enter this lock.
    runAs = (lock, owner, fn, ...args) => runOwning(lock, lock.#native, lock.#table, owner, fn, args)
    runAsIfHolding = (lock, owner, fn) =>
      runOwning(lock, lock.#native, lock.#table, owner, fn, [], lock.#native.holdsEitherSide(owner))
    releaseOwner = (lock, owner, caller) => lock.#releaseOwner(owner, caller)
    // Where a hold's signal registers, so that close() can deliver the loss at once.
    signalsOfClient = (lock) => lock.#signals
    // For a multi-lock's members.
    nativeOfLock = (lock) => lock.#native
    holdingOwner = (lock) => lock.#holdingOwner()
  }

  constructor(token, nativeLock, signals) {
    if (token !== CONSTRUCT) throw invalid('use `client.lock(path)` to make a Lock')
    this.#native = nativeLock
    this.#key = nativeLock.key
    this.#path = nativeLock.path
    this.#mode = nativeLock.mode
    this.#signals = signals
    this.#table = nativeLock.table
  }

  get path() {
    return this.#path
  }

  /** `'exclusive'` for `client.lock`, `'read'` or `'write'` for the sides of a read/write lock. */
  get mode() {
    return this.#mode
  }

  /**
   * Whether this Lock object holds the lock (through any of its owners): false once the hold is
   * lost, though `state` says `'lost'` until its last level is released.
   */
  get isHeld() {
    return this.#native.isHeld
  }

  /**
   * The state of this Lock object's hold (`'held'`, `'suspended'` or `'lost'`), or null: the
   * current flow's, if it holds this lock, or else that of the latest hold not yet released.
   */
  get state() {
    return this.#native.statePreferring(ownerIn(this.#table)) ?? null
  }

  /** Every contender, holder first, in queue order, with the identity recorded in its node. */
  contenders() {
    return fromCaller(this.#native.contenders(), callSiteOf(this.contenders))
  }

  /**
   * Calls `listener(reason)` once for each hold of this lock that is lost (`'sessionExpired'`,
   * `'disconnectedTooLong'`, `'closed'`, `'nodeDeleted'` or `'authFailed'`), by the core's rule:
   * every hold, by any async flow, taken before it was registered (unless lost already) or
   * after, through this Lock or another of the client for the path. Returns a function that
   * stops it. Listening never keeps the process alive.
   */
  onLost(listener) {
    if (typeof listener !== 'function') throw invalid(`listener must be a function, got ${describe(listener)}`)
    let watch = this.#native.watchLost((reason) => {
      if (watch === null) return
      try {
        listener(reason)
      } catch (error) {
        // As onStateChange: the error surfaces, and later losses are still reported.
        queueMicrotask(() => {
          throw error
        })
      }
    })
    return () => {
      if (watch === null) return
      watch.stop()
      watch = null
    }
  }

  /** The current holder (the first, if readers hold together), or null. */
  async holder() {
    return (await fromCaller(this.#native.holder(), callSiteOf(this.holder))) ?? null
  }

  /** Every participant holding now, in queue order: the readers holding together, or the one holder. */
  holders() {
    return fromCaller(this.#native.holders(), callSiteOf(this.holders))
  }

  /**
   * Acquires the lock and resolves to a Hold, or to `null` when `timeoutMs` passed first (`0`:
   * only tries): `await using hold = await lock.acquire({ timeoutMs })` works, as `await using`
   * takes null. Inside `withLock` (or `hold.run`) of this lock, re-enters at once, with no
   * ZooKeeper traffic. Anywhere else, the call is a new owner: a contender of its own, even
   * against other calls in the same async function. To nest further calls under this hold, run
   * them with `hold.run(fn)`.
   */
  acquire(options) {
    let timeoutMs, signal
    try {
      const opts = checkOptions(options, ACQUIRE_OPTIONS, 'lock.acquire')
      timeoutMs = checkWaitMs(opts.timeoutMs, 'timeoutMs')
      signal = checkSignal(opts.signal)
      if (signal?.aborted) throw abortError(signal)
      const nested = this.#reenter()
      if (nested !== null) return Promise.resolve(nested)
    } catch (error) {
      // Still synchronous, so the stack is the caller's: captured only when needed, as it costs
      // more than the whole re-entry.
      return Promise.reject(atCaller(error, callSiteOf(this.acquire)))
    }
    // Deliberately not `enterWith`: called from an async function, that would make the
    // caller's whole context the owner, and a sibling call it starts later would re-enter
    // instead of waiting its turn.
    let owner
    try {
      owner = this.#acquiringOwner()
    } catch (error) {
      return Promise.reject(atCaller(error, callSiteOf(this.acquire)))
    }
    return this.#contend(owner, timeoutMs, signal)
  }

  /**
   * Runs `fn(hold)` holding the lock and releases it when `fn` settles. Inside `fn` (and
   * everything it starts), the lock is held by that flow: nested calls re-enter. Rejects with
   * ZKLOCK_TIMEOUT if `timeoutMs` passed before the lock was obtained.
   */
  withLock(fn, options) {
    let timeoutMs, signal, hold
    try {
      if (typeof fn !== 'function') throw invalid(`withLock needs a function, got ${describe(fn)}`)
      const opts = checkOptions(options, ACQUIRE_OPTIONS, 'lock.withLock')
      timeoutMs = checkWaitMs(opts.timeoutMs, 'timeoutMs')
      signal = checkSignal(opts.signal)
      if (signal?.aborted) throw abortError(signal)
      hold = this.#reenter()
    } catch (error) {
      return Promise.reject(atCaller(error, callSiteOf(this.withLock)))
    }
    if (hold !== null) {
      const owner = ownerIn(this.#table)
      return runThenRelease(hold, fn, (call) => runAs(this, owner, call))
    }
    // Not an async function, as `#contend`: a queued call keeps no async frame, and the function
    // runs in the native promise's own reaction (no second one).
    let owner
    try {
      owner = this.#acquiringOwner()
    } catch (error) {
      return Promise.reject(atCaller(error, callSiteOf(this.withLock)))
    }
    return this.#contend(owner, timeoutMs, signal, fn)
  }

  // withLock's end: `fn(held)` run as `owner`, then the hold released.
  #runHeld(owner, held, fn, timeoutMs) {
    if (held === null) {
      throw this.#native.timeoutError(timeoutMs) // in core's words, as every language says it
    }
    return runThenRelease(held, fn, (call) => runAs(this, owner, call))
  }

  /**
   * Releases one level of the current async flow's hold (the flow of a `withLock` function or
   * of `hold.run`). Rejects with ZKLOCK_NOT_OWNER if this flow does not hold the lock.
   */
  release() {
    const owner = ownerIn(this.#table)
    // Outside any holder's flow there is no owner to ask the core about; inside one that does
    // not hold the lock (any more), the core rejects with ZKLOCK_NOT_OWNER.
    if (owner === undefined) {
      return Promise.reject(zklockError(codes.NOT_OWNER, 'this async flow does not hold the lock', this.#path))
    }
    return this.#releaseOwner(owner, this.release)
  }

  // One level of `owner`'s hold: nested levels at once (a lost hold throws), the last one with
  // the delete. `caller` is the public method called, whose caller's stack errors carry.
  #releaseOwner(owner, caller) {
    try {
      if (fast.releaseNested(this.#key, owner)) return RESOLVED
    } catch (error) {
      return Promise.reject(atCaller(error, callSiteOf(caller)))
    }
    this.#forget(owner)
    return this.#releaseLast(owner)
  }

  async #releaseLast(owner) {
    try {
      await this.#native.release(owner)
    } catch (error) {
      throw restacked(error)
    } finally {
      maybeDone(owner)
    }
  }

  // Who acquires when the current flow does not re-enter: the flow's owner if what it holds
  // decides the acquisition (the write holder's read is a downgrade), else a new owner.
  #acquiringOwner() {
    const holding = this.#holdingOwner()
    if (holding !== undefined) return holding
    this.#refuseWaitingOnItself()
    return native.newOwner()
  }

  // A flow that holds this path through another Lock of the client that is not of this one's
  // owner table (another identifier or ACL: Locks that agree share one, and re-enter) would queue
  // behind its own node and wait forever: ZKLOCK_DEADLOCK at once, as the core says it of a
  // thread (Python, C, Rust) in the same place. Two readers do not wait for each other.
  #refuseWaitingOnItself() {
    for (let link = flows.getStore(); link !== undefined; link = link.up) {
      const other = link.lock
      if (
        link.table !== this.#table &&
        other.path === this.#path &&
        signalsOfClient(other) === this.#signals &&
        !(this.#mode === 'read' && other.mode === 'read') &&
        nativeOfLock(other).holdsEitherSide(link.owner)
      ) {
        throw zklockError(
          codes.DEADLOCK,
          "this async flow holds the path through a lock of another identifier or ACL (locks of the same identifier and ACL re-enter): it would wait for itself",
          this.#path,
        )
      }
    }
  }

  // The current flow's owner if it holds this lock or the other side of its read/write lock.
  #holdingOwner() {
    const owner = ownerIn(this.#table)
    return owner !== undefined && this.#native.holdsEitherSide(owner) ? owner : undefined
  }

  // A new level for the current flow, if it holds the lock; null otherwise. Throws what the core
  // refuses: a lost hold (ZKLOCK_LOCK_LOST), a reader asking for the write side (ZKLOCK_DEADLOCK).
  #reenter() {
    const owner = ownerIn(this.#table)
    if (owner === undefined) return null
    const holdId = fast.reenter(this.#key, owner)
    if (holdId === 0) return null
    const nativeHold = this.#memoized(owner, holdId) ?? this.#remember(owner, this.#native.holdOf(owner))
    return new Hold(CONSTRUCT, this, owner, nativeHold)
  }

  // The Hold of `owner`, which its native acquisition just settled as holding: the hold itself is
  // the one recorded for it (see NativeLock.acquire).
  #heldBy(owner) {
    const nativeHold = this.#native.holdOf(owner)
    if (nativeHold === null) {
      // Only this flow, which has not seen the hold yet, could have released it.
      throw zklockError(codes.NOT_OWNER, 'the hold just acquired is no longer recorded for its flow', this.#path)
    }
    return new Hold(CONSTRUCT, this, owner, this.#remember(owner, nativeHold))
  }

  // What a native acquisition settles with (see NativeLock.acquire) made a Hold (null: not had),
  // or, for withLock, the function run holding and the hold then released. One function each for
  // every waiter of this lock: a queued acquisition keeps no closure.
  #settled = (owner) => (owner === null ? null : this.#heldBy(owner))
  #settledToRun = ([owner, fn]) => runThenRelease(this.#heldBy(owner), fn, (call) => runAs(this, owner, call))

  // The memoized native hold of `owner`, if it is the hold `holdId`.
  #memoized(owner, holdId) {
    if (owner === this.#lastOwner) return this.#lastId === holdId ? this.#lastHold : undefined
    const other = this.#others?.get(owner)
    return other?.id === holdId ? other.hold : undefined
  }

  // The id read once: a native getter costs as much as the re-entry.
  #remember(owner, nativeHold) {
    if (this.#lastOwner === undefined || this.#lastOwner === owner) {
      this.#lastOwner = owner
      this.#lastId = nativeHold.id
      this.#lastHold = nativeHold
    } else {
      ;(this.#others ??= new Map()).set(owner, { id: nativeHold.id, hold: nativeHold })
    }
    return nativeHold
  }

  #forget(owner) {
    if (owner === this.#lastOwner) {
      this.#lastOwner = undefined
      this.#lastHold = null
    } else {
      this.#others?.delete(owner)
    }
  }

  // Sends the attempt's create before its first await (the native acquire begins at once), so
  // that one client's calls queue in the order they were made.
  //
  // Not an async function, and no closure: a queued acquisition is the native promise and the
  // one derived from it, what it needs at the end (its owner, withLock's function) carried by the
  // native promise. Everything a waiter keeps in V8's heap is there through the queue, and V8
  // sized its young generation by what survived a long queue's forming (doubled twice for
  // 10,000 waiters with a closure each, and again in the handoffs).
  #contend(owner, timeoutMs, signal, fn) {
    if (signal !== undefined) {
      const contending = this.#contendAbortable(owner, timeoutMs, signal)
      return fn === undefined ? contending : contending.then((held) => this.#runHeld(owner, held, fn, timeoutMs))
    }
    let acquiring
    try {
      acquiring = this.#native.acquire(owner, timeoutMs, false, fn)
    } catch (error) {
      return Promise.reject(restacked(error))
    }
    return acquiring.then(fn === undefined ? this.#settled : this.#settledToRun, rejectRestacked)
  }

  async #contendAbortable(owner, timeoutMs, signal) {
    // Aborting drops the native attempt, which removes its node.
    const stopWatching = onAbort(signal, () => this.#native.abort(owner))
    try {
      let settled
      try {
        settled = await this.#native.acquire(owner, timeoutMs, true)
      } catch (error) {
        throw restacked(error)
      }
      if (signal.aborted) {
        // Aborted just as the lock was obtained: give it back.
        if (settled !== null) await this.#native.release(owner).catch(() => {})
        throw abortError(signal)
      }
      return this.#settled(settled)
    } finally {
      stopWatching()
    }
  }
}

// ----------------------------------------------------------------------------- read/write lock

/**
 * A fair read/write lock (Curator's InterProcessReadWriteLock): many readers at once, or one
 * writer. `read` and `write` are ordinary Locks whose async flows are one set of owners, so the
 * write holder's flow may take the read side (a downgrade), and a reader's flow asking for the
 * write side is refused with ZKLOCK_DEADLOCK.
 */
class ReadWriteLock {
  #path
  #read
  #write

  constructor(token, nativeLock, signals) {
    if (token !== CONSTRUCT) throw invalid('use `client.readWriteLock(path)` to make a ReadWriteLock')
    this.#path = nativeLock.path
    this.#read = new Lock(CONSTRUCT, nativeLock.read(), signals)
    this.#write = new Lock(CONSTRUCT, nativeLock.write(), signals)
  }

  get path() {
    return this.#path
  }

  /** The read side: shared with other readers; a reader after a waiting writer waits behind it. */
  get read() {
    return this.#read
  }

  /** The write side: exclusive. */
  get write() {
    return this.#write
  }

  /** Every participant, readers and writers, in queue order, each with its `mode`. */
  contenders() {
    return this.#read.contenders()
  }

  /** Every participant holding now: the readers holding together, or the one writer. */
  holders() {
    return this.#read.holders()
  }
}

// ----------------------------------------------------------------------------- hold

// `lost` is the native { reason, description }: the description is the core's own text.
function lostError(lost, path) {
  const error = zklockError(codes.LOCK_LOST, `lock lost: ${lost.description}`, path)
  error.lostReason = lost.reason
  return error
}

/**
 * The lost signal of a hold, or of a set of holds taken together: aborted with `errorOf(lost)`
 * for the first found lost, never for a release. Which one is the core's to say: `source.lost`
 * (now) and `source.watchLost` (later), a native hold's or set of leases' (or a multi-lock's,
 * adapted). Its entry in the client's `signals` lets close() deliver the loss at once (the native
 * notification does not keep the process alive).
 */
function lostSignal(source, errorOf, signals) {
  const controller = new AbortController()
  const entry = {
    abortIfLost() {
      const found = source.lost
      if (found && !controller.signal.aborted) controller.abort(errorOf(found))
    },
  }
  entry.abortIfLost()
  if (!controller.signal.aborted) {
    signals.add(entry)
    source.watchLost((found) => {
      signals.delete(entry)
      if (!controller.signal.aborted) controller.abort(errorOf(found))
    })
  }
  return { controller, entry }
}

/** One level of a held lock, from `lock.acquire()` or given to `withLock`'s function. */
class Hold {
  #lock
  #owner
  #native
  #released = false
  #controller = null
  #signalEntry = null

  constructor(token, lock, owner, nativeHold) {
    if (token !== CONSTRUCT) throw invalid('holds come from lock.acquire()')
    this.#lock = lock
    this.#owner = owner
    this.#native = nativeHold
  }

  /** The lock node's creation zxid (a bigint): it rises across successive holders. Throws ZKLOCK_LOCK_LOST once lost, ZKLOCK_NOT_OWNER once released. */
  get fencingToken() {
    return this.#native.fencingToken
  }

  /** The lock node's sequence number. */
  get sequence() {
    return this.#native.sequence
  }

  /** `'held'`, `'suspended'`, `'lost'` or `'released'`. */
  get state() {
    return this.#native.state
  }

  /**
   * Aborts when the lock is lost (session expired, client closed, node deleted), with a
   * ZKLOCK_LOCK_LOST error as its reason; pass it to fetch or any other abortable work. Never
   * aborts for a release.
   */
  get signal() {
    if (this.#controller === null) {
      const path = this.#lock.path
      const lost = lostSignal(this.#native, (reason) => lostError(reason, path), signalsOfClient(this.#lock))
      this.#controller = lost.controller
      this.#signalEntry = lost.entry
    }
    return this.#controller.signal
  }

  /**
   * Releases this level; the last level deletes the lock node and resolves once the server
   * confirmed it. Rejects with ZKLOCK_NOT_OWNER if this hold was already released, and with
   * ZKLOCK_LOCK_LOST if the lock was lost (nothing is deleted then).
   */
  release() {
    if (this.#released) {
      return Promise.reject(zklockError(codes.NOT_OWNER, 'this hold was already released', this.#lock.path))
    }
    this.#released = true
    if (this.#signalEntry !== null) signalsOfClient(this.#lock).delete(this.#signalEntry)
    return releaseOwner(this.#lock, this.#owner, this.release)
  }

  /**
   * Runs `fn()` as this hold's owner: calls on the same lock in it (and in everything it
   * starts) re-enter instead of queueing behind this hold.
   */
  run(fn) {
    if (typeof fn !== 'function') throw invalid(`hold.run needs a function, got ${describe(fn)}`)
    return runAsIfHolding(this.#lock, this.#owner, fn)
  }

  /** `await using hold = await lock.acquire()` releases at the end of the block. */
  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    if (!this.#released) await this.release()
  }
}

// ----------------------------------------------------------------------------- semaphore, multi-lock

// Abortable acquisitions of semaphores and multi-locks are named by these ids (a lock's are by
// owner): unique among those in flight.
let nextAbortId = 0

/**
 * Runs a native acquisition, `start(abortId)`, that `signal` (if any) aborts through
 * `target.abort(abortId)`: resolves to what it resolves to (null at the timeout), or rejects
 * with an AbortError once its nodes are removed (what it got just as it aborted is released).
 */
async function acquireAbortably(target, start, signal) {
  if (signal === undefined) {
    try {
      return await start(undefined)
    } catch (error) {
      throw restacked(error)
    }
  }
  const abortId = (nextAbortId = (nextAbortId + 1) % 2 ** 32)
  const stopWatching = onAbort(signal, () => target.abort(abortId))
  try {
    let acquired
    try {
      acquired = await start(abortId)
    } catch (error) {
      throw restacked(error)
    }
    if (signal.aborted) {
      if (acquired) await acquired.release().catch(() => {})
      throw abortError(signal)
    }
    return acquired
  } finally {
    stopWatching()
  }
}

// The options of `acquire` and of the `with...` helpers: [timeoutMs, signal], and, for a
// semaphore, the number of leases.
function acquisitionOptions(options, allowed, what) {
  const opts = checkOptions(options, allowed, what)
  const timeoutMs = checkWaitMs(opts.timeoutMs, 'timeoutMs')
  const signal = checkSignal(opts.signal)
  if (signal?.aborted) throw abortError(signal)
  return { timeoutMs, signal, leases: checkCount(opts.leases, 'leases', { fallback: 1 }) }
}

// Runs `fn(held)` (through `run(call)`, which may run it as an owner) and releases `held` when it
// settles. The function's error is the one that matters: a failed release (say, the lock was lost
// meanwhile) is attached to it as `releaseError`.
async function runThenRelease(held, fn, run) {
  let result
  try {
    result = await run(() => fn(held))
  } catch (error) {
    await held.release().catch((releaseError) => {
      if (error !== null && typeof error === 'object' && Object.isExtensible(error) && !('releaseError' in error)) {
        error.releaseError = releaseError
      }
    })
    throw error
  }
  await held.release()
  return result
}

// `acquire(options)` of a semaphore or a multi-lock: the options checked at once (a bad one
// rejects with the stack of `caller`'s caller), then `take(opts)`.
function acquireChecked(options, allowed, what, caller, take) {
  let opts
  try {
    opts = acquisitionOptions(options, allowed, what)
  } catch (error) {
    return Promise.reject(atCaller(error, callSiteOf(caller)))
  }
  return take(opts)
}

// `withLease` and `withLocks`: `take(opts)`, then `fn(held)` run by `run(held, call)`, then the
// release; `timedOut(opts)` is the error when nothing was had in time.
async function withTaken(fn, options, allowed, what, { take, timedOut, run }) {
  if (typeof fn !== 'function') throw invalid(`${what} needs a function, got ${describe(fn)}`)
  const opts = acquisitionOptions(options, allowed, what)
  const held = await take(opts)
  if (held === null) throw timedOut(opts)
  return runThenRelease(held, fn, (call) => run(held, call))
}

const SEMAPHORE_ACQUIRE_OPTIONS = Object.freeze(['leases', 'timeoutMs', 'signal'])

let nativeOfSemaphore

/**
 * A counting semaphore (Curator's InterProcessSemaphoreV2, node for node): at most max leases
 * held at once across every process and language on the path. Not reentrant: each acquisition
 * takes leases of its own, and any flow may release them. With max 1 it is Curator's
 * InterProcessSemaphoreMutex.
 */
class Semaphore {
  #native
  #path
  #signals

  static {
    nativeOfSemaphore = (semaphore) => semaphore.#native
  }

  constructor(token, nativeSemaphore, signals) {
    if (token !== CONSTRUCT) throw invalid('use `client.semaphore(path, options)` to make a Semaphore')
    this.#native = nativeSemaphore
    this.#path = nativeSemaphore.path
    this.#signals = signals
  }

  get path() {
    return this.#path
  }

  /** The max now: the fixed one, or the shared count's value (read from the server). */
  currentMaxLeases() {
    return fromCaller(this.#native.currentMaxLeases(), callSiteOf(this.currentMaxLeases))
  }

  /** The lease nodes held, those waiting (the head of the queue's), and the queue at the internal mutex. */
  participants() {
    return fromCaller(this.#native.participants(), callSiteOf(this.participants))
  }

  /**
   * Acquires `leases` leases (default 1), all or nothing, and resolves to them, or to `null`
   * when `timeoutMs` passed first (`0`: only tries): one deadline for all of them, and every node
   * of the attempt removed before it resolves.
   */
  acquire(options) {
    return acquireChecked(options, SEMAPHORE_ACQUIRE_OPTIONS, 'semaphore.acquire', this.acquire, (opts) => this.#acquire(opts))
  }

  /**
   * Runs `fn(leases)` holding the leases (option `leases`, default 1) and releases them when
   * `fn` settles. Rejects with ZKLOCK_TIMEOUT if `timeoutMs` passed before they were obtained.
   */
  withLease(fn, options) {
    return withTaken(fn, options, SEMAPHORE_ACQUIRE_OPTIONS, 'semaphore.withLease', {
      take: (opts) => this.#acquire(opts),
      timedOut: (opts) => this.#native.timeoutError(opts.leases, opts.timeoutMs), // in core's words
      run: (leases, call) => call(),
    })
  }

  async #acquire({ leases, timeoutMs, signal }) {
    const start = (abortId) => this.#native.acquire(leases, timeoutMs, abortId)
    const nativeLeases = await acquireAbortably(this.#native, start, signal)
    return nativeLeases ? new Leases(CONSTRUCT, nativeLeases, this.#path, this.#signals) : null
  }
}

/** The worst state of several holds: lost if any is, else suspended if any is, else held. */
/** Leases taken together by one `semaphore.acquire()`, each with its node and fencing token. */
class Leases {
  #native
  #holds
  #path
  #signals
  #released = false
  #controller = null
  #signalEntry = null

  constructor(token, nativeLeases, path, signals) {
    if (token !== CONSTRUCT) throw invalid('leases come from semaphore.acquire()')
    this.#native = nativeLeases
    this.#holds = nativeLeases.holds()
    this.#path = path
    this.#signals = signals
  }

  /** How many leases. */
  get count() {
    return this.#holds.length
  }

  /** Each lease node's creation zxid (bigints, in the order made): they rise across the leases of a path. Throws ZKLOCK_LOCK_LOST once one is lost, ZKLOCK_NOT_OWNER once released. */
  get fencingTokens() {
    return this.#holds.map((nativeHold) => nativeHold.fencingToken)
  }

  /** The lease nodes' paths (`<path>/leases/_c_<uuid>-lease-<sequence>`). */
  get nodes() {
    return this.#holds.map((nativeHold) => nativeHold.nodePath)
  }

  /** `'held'`, `'suspended'` or `'lost'` (the worst of the leases'), or `'released'`. */
  get state() {
    return this.#native.state
  }

  /** Aborts when a lease is lost (never on release), with a ZKLOCK_LOCK_LOST error as its reason. */
  get signal() {
    if (this.#controller === null) {
      const path = this.#path
      const lost = lostSignal(this.#native, (reason) => lostError(reason, path), this.#signals)
      this.#controller = lost.controller
      this.#signalEntry = lost.entry
    }
    return this.#controller.signal
  }

  /**
   * Deletes every lease node and resolves once the server confirmed each. Rejects with
   * ZKLOCK_NOT_OWNER if already released, ZKLOCK_LOCK_LOST if a lease was lost (it is not
   * deleted; the others are).
   */
  release() {
    if (this.#released) {
      return Promise.reject(zklockError(codes.NOT_OWNER, 'these leases were already released', this.#path))
    }
    this.#released = true
    if (this.#signalEntry !== null) this.#signals.delete(this.#signalEntry)
    return fromCaller(this.#native.release(), callSiteOf(this.release))
  }

  /** `await using leases = await semaphore.acquire()` releases at the end of the block. */
  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    if (!this.#released) await this.release()
  }
}

const MULTI_ACQUIRE_OPTIONS = Object.freeze(['timeoutMs', 'signal'])

/**
 * Several locks taken together, all or none, from `client.multiLock(members)`: taken in one
 * canonical order (by path, then kind), so two multi-locks over the same paths never deadlock,
 * under one deadline, released in reverse order.
 */
class MultiLock {
  #native
  #locks
  #signals
  #members

  constructor(token, nativeMultiLock, locks, signals) {
    if (token !== CONSTRUCT) throw invalid('use `client.multiLock(members)` to make a MultiLock')
    this.#native = nativeMultiLock
    this.#locks = locks
    this.#signals = signals
    this.#members = Object.freeze(nativeMultiLock.members().map((member) => Object.freeze(member)))
  }

  /** The members in the order they are taken: `{ path, kind, count }`, kind `'mutex'`, `'read'`, `'write'` or `'leases'`. */
  get members() {
    return this.#members
  }

  /**
   * Takes every member and resolves to a MultiHold, or to `null` when `timeoutMs` passed first
   * (`0`: each member tried once), with what was taken released. A flow that holds a member
   * lock re-enters it (as a thread or task does in Python and C); any other acquisition is a new
   * owner of the member locks.
   */
  acquire(options) {
    return acquireChecked(options, MULTI_ACQUIRE_OPTIONS, 'multiLock.acquire', this.acquire, (opts) => this.#acquire(opts))
  }

  /**
   * Runs `fn(multiHold)` holding every member and releases them when `fn` settles; inside `fn`,
   * calls on the member locks re-enter. Rejects with ZKLOCK_TIMEOUT if `timeoutMs` passed first.
   */
  withLocks(fn, options) {
    const missed = {}
    return withTaken(fn, options, MULTI_ACQUIRE_OPTIONS, 'multiLock.withLocks', {
      take: (opts) => this.#acquire(opts, missed),
      // The member it waited for, in the core's words (as in every language).
      timedOut: (opts) => this.#native.timeoutError(missed.member.index, opts.timeoutMs),
      run: (held, call) => held.run(call),
    })
  }

  /** The MultiHold, or null when not had in time; `missed.member` then says which member. */
  async #acquire({ timeoutMs, signal }, missed = {}) {
    // The calling flow's owner when it holds a member lock, so that the member is re-entered
    // rather than waited for. Members it holds as different owners (separate withLock calls)
    // cannot be one multi-lock's: it would wait on itself.
    const holders = new Set(this.#locks.map(holdingOwner).filter((held) => held !== undefined))
    if (holders.size > 1) {
      throw zklockError(
        codes.DEADLOCK,
        'this flow holds members of the multi-lock through separate acquisitions: taking them together would wait on itself',
        this.#members[0].path,
      )
    }
    const owner = holders.size === 1 ? [...holders][0] : native.newOwner()
    const start = async (abortId) => {
      const taken = await this.#native.acquire(owner, timeoutMs, abortId)
      if (taken instanceof native.NativeMultiGuard) return taken
      missed.member = taken
      return null
    }
    const guard = await acquireAbortably(this.#native, start, signal)
    return guard ? new MultiHold(CONSTRUCT, guard, owner, this.#locks, this.#signals) : null
  }
}

// A multi-lock member's loss: the member's path and kind, and why.
function memberLostError(member, lost) {
  const error = zklockError(codes.LOCK_LOST, `${member.kind} member of a multi-lock lost: ${lost.description}`, member.path)
  error.lostReason = lost.reason
  error.member = { path: member.path, kind: member.kind }
  return error
}

/** Every member of a multi-lock, held. */
class MultiHold {
  #native
  #owner
  #locks
  #signals
  #members
  #released = false
  #controller = null
  #signalEntry = null

  constructor(token, nativeGuard, owner, locks, signals) {
    if (token !== CONSTRUCT) throw invalid('multi-holds come from multiLock.acquire()')
    this.#native = nativeGuard
    this.#owner = owner
    this.#locks = locks
    this.#signals = signals
    this.#members = nativeGuard.members().map((member, i) => ({ ...member, holds: nativeGuard.holds(i) }))
  }

  /** Each member's fencing tokens (one for a lock, one per lease), in canonical order: `{ path, kind, tokens }`. Throws ZKLOCK_LOCK_LOST once a member is lost, ZKLOCK_NOT_OWNER once released. */
  get fencingTokens() {
    return this.#members.map(({ path, kind, holds }) => ({ path, kind, tokens: holds.map((h) => h.fencingToken) }))
  }

  /** `'held'`, `'suspended'` or `'lost'` (the worst of the members'), or `'released'`. */
  get state() {
    return this.#released ? 'released' : this.#native.state
  }

  /** The first member (in canonical order) found lost, `{ path, kind, lostReason }`, or null. */
  get lostMember() {
    const lost = this.#native.lostMember
    return lost ? { path: lost.path, kind: lost.kind, lostReason: lost.lost.reason } : null
  }

  /** Aborts when a member is lost (never on release); its reason, a ZKLOCK_LOCK_LOST error, names the member (`reason.member`). */
  get signal() {
    if (this.#controller === null) {
      const native = this.#native
      const lost = lostSignal(
        { get lost() { return native.lostMember }, watchLost: (notify) => native.watchLostMember(notify) },
        (member) => memberLostError(member, member.lost),
        this.#signals,
      )
      this.#controller = lost.controller
      this.#signalEntry = lost.entry
    }
    return this.#controller.signal
  }

  /**
   * Releases every member in reverse canonical order, each confirmed before the next. Rejects
   * with ZKLOCK_NOT_OWNER if already released, and with the first member's error (say
   * ZKLOCK_LOCK_LOST for a lost member) after releasing the others.
   */
  release() {
    if (this.#released) {
      return Promise.reject(zklockError(codes.NOT_OWNER, 'this multi-lock was already released', this.#members[0].path))
    }
    this.#released = true
    if (this.#signalEntry !== null) this.#signals.delete(this.#signalEntry)
    const owner = this.#owner
    return fromCaller(this.#native.release(), callSiteOf(this.release)).finally(() => maybeDone(owner))
  }

  /** Runs `fn()` as this hold's owner: calls on the member locks in it (and what it starts) re-enter. */
  run(fn) {
    if (typeof fn !== 'function') throw invalid(`multiHold.run needs a function, got ${describe(fn)}`)
    const nested = this.#locks.reduceRight((inner, lock) => () => runAsIfHolding(lock, this.#owner, inner), fn)
    return nested()
  }

  /** Releases, unless already released. */
  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    if (!this.#released) await this.release()
  }
}

/** zklock's version (the native addon's): one number for the crate, the wheel and the npm package. */
const version = native.version()

module.exports = {
  Client,
  Lock,
  ReadWriteLock,
  Hold,
  Semaphore,
  Leases,
  MultiLock,
  MultiHold,
  ZkLockError,
  AbortError,
  codes,
  perms,
  version,
}
// `import zklock from 'zookeeper-lock'` compiled by TypeScript to CommonJS without esModuleInterop reads
// `require('zookeeper-lock').default`: the module itself, as index.d.ts declares (not enumerable, so that
// the module's names stay those declared).
Object.defineProperty(module.exports, 'default', { value: module.exports, enumerable: false })
