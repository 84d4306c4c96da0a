'use strict'
// Which async flow is which owner of a lock: the one AsyncLocalStorage of the layer.

const { AsyncLocalStorage } = require('node:async_hooks')

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

module.exports = { flows, ownerIn, runOwning, maybeDone }
