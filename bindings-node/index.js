'use strict'
// zklock for Node: the JavaScript layer over the native addon (zklock.node, built by build.mjs).
// The addon runs the Rust core, whose owner table says who holds what; this layer validates
// arguments, names owners (each async flow is one, through AsyncLocalStorage) and shapes holds,
// signals and errors.
//
// One file a concept, in lib/, as the addon's src/ is: the client (client.js), the lock and its
// holds (lock.js), the read/write lock (rwlock.js), the semaphore (semaphore.js), the multi-lock
// (multi_lock.js) and the errors (error.js), over what they share: the addon (native.js), the
// argument checks (validate.js), the async flows' owners (owners.js) and the acquisitions'
// helpers (acquisition.js). This file only gathers the public names.

// The client first: it loads the other files, each after those it requires. (Measured, Node 20:
// 51 MB resident after `require`, against 55.5 MB with native.js, error.js and validate.js
// required first, and 50.7 MB for the one-file layer this replaced.)
const { Client } = require('./lib/client.js')
const { Lock, Hold } = require('./lib/lock.js')
const { ReadWriteLock } = require('./lib/rwlock.js')
const { Semaphore, Leases } = require('./lib/semaphore.js')
const { MultiLock, MultiHold } = require('./lib/multi_lock.js')
const { codes, ZkLockError, AbortError } = require('./lib/error.js')
const { perms } = require('./lib/validate.js')
const { native } = require('./lib/native.js')

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
