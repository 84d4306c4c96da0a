'use strict'
// zklock's errors in JavaScript: the codes, ZkLockError (which the addon makes the core's errors
// instances of, src/error.rs) and AbortError, the few errors this layer makes itself, and the
// stacks that lead to the caller's line.

const { native } = require('./native.js')

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

// `lost` is the native { reason, description }: the description is the core's own text.
function lostError(lost, path) {
  const error = zklockError(codes.LOCK_LOST, `lock lost: ${lost.description}`, path)
  error.lostReason = lost.reason
  return error
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
module.exports = {
  codes,
  ZkLockError,
  AbortError,
  zklockError,
  invalid,
  abortError,
  lostError,
  fromCaller,
  atCaller,
  restacked,
  rejectRestacked,
  callSiteOf,
}
