'use strict'
// What the recipes' acquisitions and holds share: one 'abort' listener a signal, an abortable
// native acquisition, the options of acquire and of the with... helpers, the function run
// holding and then released, and a hold's lost signal.

const { abortError, atCaller, callSiteOf, invalid, restacked } = require('./error.js')
const { checkCount, checkOptions, checkSignal, checkWaitMs, describe } = require('./validate.js')

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

module.exports = { onAbort, lostSignal, acquireAbortably, acquisitionOptions, runThenRelease, acquireChecked, withTaken }
