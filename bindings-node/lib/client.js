'use strict'
// The client: one ZooKeeper session, its state, and the recipes made on it.

const { native, CONSTRUCT } = require('./native.js')
const { invalid, fromCaller, callSiteOf } = require('./error.js')
const { checkOptions, checkMs, checkBytes, checkCount, checkString, checkSasl, checkAcl, checkTls, lockArguments, describe } =
  require('./validate.js')
const { Lock, nativeOfLock } = require('./lock.js')
const { ReadWriteLock } = require('./rwlock.js')
const { Semaphore, nativeOfSemaphore } = require('./semaphore.js')
const { MultiLock } = require('./multi_lock.js')

let exitHooked = false

// A script that forgets close() still ends its sessions when it exits, rather than leaving its
// lock nodes to the session timeout. 'exit' also fires for process.exit(), which skips the
// addon's own environment cleanup hook. The listener does not keep the process alive.
function closeSessionsAtExit() {
  if (exitHooked) return
  exitHooked = true
  process.once('exit', () => native.closeSessionsAtExit())
}

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

module.exports = { Client }
