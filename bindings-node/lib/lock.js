'use strict'
// The lock (Curator's InterProcessMutex, and each side of a read/write lock) and its holds: who
// acquires (the current async flow's owner, or a new one), re-entry, release, and the memo of
// native holds.

const { native, fast, CONSTRUCT } = require('./native.js')
const { codes, zklockError, invalid, abortError, lostError, fromCaller, atCaller, restacked, rejectRestacked, callSiteOf } =
  require('./error.js')
const { ACQUIRE_OPTIONS, checkOptions, checkWaitMs, checkSignal, describe } = require('./validate.js')
const { flows, ownerIn, runOwning, maybeDone } = require('./owners.js')
const { onAbort, lostSignal, runThenRelease } = require('./acquisition.js')

// What a nested release resolves to: one settled promise, shared, rather than a new one a call.
const RESOLVED = Promise.resolve()

// What Hold needs of its Lock, kept out of reach of users (no underscore methods to call):
// assigned in Lock's static block, where its private fields are in scope.
let runAs, runAsIfHolding, releaseOwner, signalsOfClient, nativeOfLock, flowOwner

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
    // The current flow's owner in the lock's owner table, if it has one.
    flowOwner = (lock) => ownerIn(lock.#table)
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

  // Who acquires when the current flow does not re-enter, as core chooses: the flow's owner if
  // what it holds decides the acquisition (the write holder's read is a downgrade), else a new
  // owner (unless the flow would wait on itself).
  #acquiringOwner() {
    const current = ownerIn(this.#table) ?? null
    const owner = this.#native.ownerToAcquire(current)
    if (owner !== current) this.#refuseWaitingOnItself()
    return owner
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

// What the other files of the layer need of a Lock (the client and the multi-lock), out of
// users' reach: the package exports only index.js.
module.exports = { Lock, Hold, nativeOfLock, flowOwner, runAsIfHolding }
