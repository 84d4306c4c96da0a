'use strict'
// Several locks taken together, all or none (Curator's InterProcessMultiLock, without its
// deadlock), and the multi-hold.

const { native, CONSTRUCT } = require('./native.js')
const { codes, zklockError, invalid, fromCaller, callSiteOf } = require('./error.js')
const { describe } = require('./validate.js')
const { maybeDone } = require('./owners.js')
const { lostSignal, acquireAbortably, acquireChecked, withTaken } = require('./acquisition.js')
const { flowOwner, runAsIfHolding } = require('./lock.js')

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
    // As core chooses: the calling flow's owner when it holds a member lock, so that the member
    // is re-entered rather than waited for, else a new one; ZKLOCK_DEADLOCK if it holds members
    // as different owners (separate withLock calls): it would wait on itself.
    const candidates = this.#locks.map(flowOwner).filter((owner) => owner !== undefined)
    const owner = this.#native.ownerToAcquire(candidates)
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
    return this.#native.state
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

module.exports = { MultiLock, MultiHold }
