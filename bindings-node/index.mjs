// ES module entry: the same classes as `require('zklock')`.
import zklock from './index.js'

export const { Client, Lock, ReadWriteLock, Hold, ZkLockError, AbortError, codes, perms, version } = zklock
export default zklock
