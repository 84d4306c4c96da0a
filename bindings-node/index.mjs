// ES module entry: the same classes as `require('zklock')`.
import zklock from './index.js'

export const { Client, Lock, ReadWriteLock, Hold, Semaphore, Leases, MultiLock, MultiHold, ZkLockError, AbortError, codes, perms, version } =
  zklock
export default zklock
