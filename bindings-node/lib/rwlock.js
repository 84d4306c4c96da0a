'use strict'
// The read/write lock (Curator's InterProcessReadWriteLock): a pair of Locks.

const { CONSTRUCT } = require('./native.js')
const { invalid } = require('./error.js')
const { Lock } = require('./lock.js')

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

module.exports = { ReadWriteLock }
