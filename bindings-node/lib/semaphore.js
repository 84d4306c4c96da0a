'use strict'
// The counting semaphore (Curator's InterProcessSemaphoreV2) and the leases it gives.

const { CONSTRUCT } = require('./native.js')
const { codes, zklockError, invalid, lostError, fromCaller, callSiteOf } = require('./error.js')
const { lostSignal, acquireAbortably, acquireChecked, withTaken } = require('./acquisition.js')

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

// For the client's multi-locks: a semaphore's native object, out of users' reach.
module.exports = { Semaphore, Leases, nativeOfSemaphore }
