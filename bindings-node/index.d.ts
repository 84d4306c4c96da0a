// Type declarations of the `zklock` package (hand-written: the public API is the JavaScript
// layer in index.js, over the native addon built from src/). Self-sufficient: Buffer and
// AbortSignal come from @types/node (an optional peer dependency: TypeScript users install it), Symbol.asyncDispose from
// TypeScript's own esnext.disposable library.
/// <reference types="node" />
/// <reference lib="esnext.disposable" />

/** zklock's version: one number for the crate, the wheel and the npm package. */
export declare const version: string

/** The `code` of every error zklock rejects with: one per kind of the core's errors. */
export declare const codes: Readonly<{
  INVALID_ARGUMENT: 'ZKLOCK_INVALID_ARGUMENT'
  TIMEOUT: 'ZKLOCK_TIMEOUT'
  NOT_OWNER: 'ZKLOCK_NOT_OWNER'
  SESSION_EXPIRED: 'ZKLOCK_SESSION_EXPIRED'
  LOCK_LOST: 'ZKLOCK_LOCK_LOST'
  CONNECTION_LOSS: 'ZKLOCK_CONNECTION_LOSS'
  AUTH_FAILED: 'ZKLOCK_AUTH_FAILED'
  CLOSED: 'ZKLOCK_CLOSED'
  ZOOKEEPER: 'ZKLOCK_ZOOKEEPER'
  /** An owner holding the read side asked for the write side: it would wait for itself forever. */
  DEADLOCK: 'ZKLOCK_DEADLOCK'
  /**
   * ZooKeeper's access control stands in the way: the lock path's ACL does not grant this client
   * the rights it needs (NoAuth: connect with `auth` credentials the ACL names), or a lock made
   * with `acl` found its lock path with an ACL that grants others more than asked.
   */
  PERMISSION_DENIED: 'ZKLOCK_PERMISSION_DENIED'
}>

/** Permission bits of custom ACL entries, as ZooKeeper numbers them; combine with `|`. */
export declare const perms: Readonly<{
  READ: 1
  WRITE: 2
  CREATE: 4
  DELETE: 8
  ADMIN: 16
  ALL: 31
}>

/**
 * One entry of a custom ACL: `perms` (bits of `perms`) for the identity `id` of the auth
 * `scheme`, as ZooKeeper has them: `world`/`anyone`, `auth`/`''` (the authenticated creator),
 * `digest`/`user:base64(sha1("user:password"))`, `ip`/`10.0.0.0/8`...
 */
export interface AclEntry {
  perms: number
  scheme: string
  id: string
}

/**
 * Who may queue for, delete in and read a lock. `'open'` (the default): anyone may do anything,
 * so any client can delete a holder's node. `'creatorAllWorldRead'`: full rights for the clients
 * authenticated as the creator (the same `auth`), read for everyone: others see the queue but
 * can neither queue nor delete. `'creatorAll'`: others cannot even list the queue. Or custom
 * entries. The creator presets need `auth` on the client (else ZKLOCK_INVALID_ARGUMENT at once).
 */
export type Acl = 'open' | 'creatorAllWorldRead' | 'creatorAll' | readonly AclEntry[]

export type ErrorCode = (typeof codes)[keyof typeof codes]

/**
 * What zklock rejects with (or throws, for bad arguments of synchronous calls): `err instanceof
 * ZkLockError`, and `err.code` says which. (An aborted acquisition rejects with AbortError.)
 */
export declare class ZkLockError extends Error {
  /**
   * zklock makes these itself; a program may too (say, a fake of a lock for its own tests), with
   * the code and the details it would carry.
   */
  constructor(message: string, code: ErrorCode, details?: { path?: string; zookeeperCode?: number; lostReason?: LostReason })
  readonly name: 'ZkLockError'
  code: ErrorCode
  /** The lock path the error concerns, when there is one. */
  path?: string
  /** ZooKeeper's numeric error code (as the Java client's KeeperException.Code), when it came from the server. */
  zookeeperCode?: number
  /** For ZKLOCK_LOCK_LOST, why the hold was lost, when known. */
  lostReason?: LostReason
}
/** The former name of ZkLockError's type. */
export type ZklockError = ZkLockError

/** Why a hold was lost. */
export type LostReason = 'sessionExpired' | 'disconnectedTooLong' | 'closed' | 'nodeDeleted' | 'authFailed'

/** The reason of an aborted `hold.signal`: `code` is `ZKLOCK_LOCK_LOST`. */
export interface LockLostError extends ZkLockError {
  code: 'ZKLOCK_LOCK_LOST'
  lostReason: LostReason
}

/** Rejection of an acquisition whose AbortSignal fired, as Node's own AbortError. */
export declare class AbortError extends Error {
  readonly name: 'AbortError'
  readonly code: 'ABORT_ERR'
  /** The signal's reason. */
  readonly cause: unknown
}

/** How a lock is taken: a mutex (`client.lock`), or a side of a read/write lock. */
export type LockMode = 'exclusive' | 'read' | 'write'

export type SessionState = 'connected' | 'disconnected' | 'expired' | 'authFailed' | 'closed'
export type HoldState = 'held' | 'suspended' | 'lost' | 'released'

export interface ConnectOptions {
  /** Session timeout asked of the server, in ms (default: the core's, 10000). Holds are lost when disconnected this long. */
  sessionTimeoutMs?: number
  /** How long `connect` tries to establish the session, in ms (default: the core's, 10000). */
  connectTimeoutMs?: number
  /**
   * Digest credentials, `"user:password"`. Without `tls` the password crosses the network in
   * clear: once connected, the client emits a process warning (`process.emitWarning`, type
   * `ZklockSecurityWarning`, code `ZKLOCK_CLEARTEXT_PASSWORD`). `sasl` never sends it.
   */
  auth?: string
  /**
   * The servers' packet limit (their jute.maxbuffer) in bytes, 1024 to 2^32-1 (default 0xfffff):
   * a lock whose path or identifier would make a larger request throws ZKLOCK_INVALID_ARGUMENT.
   */
  juteMaxbuffer?: number
  /**
   * SASL authentication on every connection. The servers then know the client as
   * `sasl:<username or principal>`, which the ACL presets' creator means. Refused credentials
   * reject with ZKLOCK_AUTH_FAILED at once; the password is never in an error.
   */
  sasl?: SaslOptions
  /**
   * TLS to every server's secureClientPort, with `tls.connect`'s names. Secrets never appear in
   * errors. Bad options reject with ZKLOCK_INVALID_ARGUMENT before any network traffic; a
   * refused handshake rejects with ZKLOCK_TIMEOUT naming its cause.
   */
  tls?: TlsOptions
}

/** PEM as a string or a Buffer. */
export type Pem = string | Buffer

export interface TlsOptions {
  /** The CA certificates (PEM) the servers' certificates must chain to. Required unless `rejectUnauthorized` is false: Node's built-in CAs are not used. */
  ca?: Pem | Pem[]
  /** The client's certificate chain (PEM), for mutual TLS and ZooKeeper's x509 auth; with `key`. */
  cert?: Pem | Pem[]
  /** The client certificate's private key (PEM: PKCS#8, PKCS#1, SEC1, or encrypted PKCS#8 with `passphrase`). */
  key?: Pem
  /** The password of an encrypted `key`. */
  passphrase?: string
  /** Verify the servers' certificates (chain and host name); default true. `false` verifies nothing: for tests only. */
  rejectUnauthorized?: boolean
  /** The host name to send as SNI and to verify the certificates against, instead of each host of the connect string. */
  servername?: string
}

/** SASL DIGEST-MD5: a user and password of the servers' JAAS `DigestLoginModule`. */
export interface SaslDigestMd5Options {
  mechanism: 'DIGEST-MD5'
  username: string
  password: string
}

/**
 * SASL GSSAPI (Kerberos): the client's `principal` (`alice@EXAMPLE.COM`) with a `keytab` (a
 * path; tickets kept in the process's memory) or a `credentialCache` (what `kinit` filled; by
 * default the default cache). The servers' principals are `<serviceName>/<host>@REALM`:
 * `serviceName` defaults to `zookeeper`, `host` to each server's in the connect string. Needs MIT
 * Kerberos's `libgssapi_krb5.so.2` on the host (else ZKLOCK_INVALID_ARGUMENT saying so).
 */
export interface SaslGssapiOptions {
  mechanism: 'GSSAPI'
  principal: string
  keytab?: string
  credentialCache?: string
  serviceName?: string
  host?: string
}

export type SaslOptions = SaslDigestMd5Options | SaslGssapiOptions

export interface LockOptions {
  /** Recorded in each lock node's identity (see `contenders()`). */
  identifier?: string
  /**
   * Given to the lock path (made persistent, not a container, when it is not `'open'`) and to
   * every lock node. A protected lock refuses, with ZKLOCK_PERMISSION_DENIED, a lock path whose
   * ACL grants others more than asked. Default `'open'`.
   */
  acl?: Acl
}

export interface AcquireOptions {
  /**
   * Give up after this many ms (an integer up to 2^31-1): `acquire` then resolves to `null`
   * within 100 ms of the deadline, the server reachable or not (so `await using hold = await
   * lock.acquire({ timeoutMs })` compiles and works); `withLock` rejects with ZKLOCK_TIMEOUT.
   * `0` only tries, answering within 2 s: held, `null` (someone else holds), or a rejection with
   * ZKLOCK_CONNECTION_LOSS (ZooKeeper could not be reached). Left out, `null` or `Infinity`: wait
   * as long as it takes, also through ZooKeeper outages of any length (when the session ends
   * meanwhile, the acquisition tries for a new one again after each `connectTimeoutMs` and queues
   * again on it; only `signal` or `client.close()` ends it early). Negative values, -1 included,
   * are refused.
   */
  timeoutMs?: number
  /** Aborting rejects with an AbortError once the attempt's node is removed (as a timeout resolves). */
  signal?: AbortSignal
}

/** Who a lock node belongs to, as zklock records it in any language. */
export interface Identity {
  host: string
  pid: number
  /** The owner's label: `async-flow:<n>@thread:<worker threadId>` for Node. */
  owner: string
  /** `rust`, `c`, `python` or `node`. */
  lang: string
  identifier?: string
}

/** One contender in a lock's queue. */
export interface Participant {
  /** The child node's name. */
  node: string
  sequence?: number
  /** How the node takes the lock, by its name; absent for a node of no lock zklock knows. */
  mode?: LockMode
  /** The node's creation zxid: its holder's fencing token. */
  fencingToken: bigint
  /** The session that owns the (ephemeral) node. */
  sessionId: bigint
  /** The identity in the node data, when zklock wrote it. */
  identity?: Identity
  /** The raw node data (Curator writes the client's IP address). */
  data: Buffer
}

/** A ZooKeeper client: one session at a time, shared by every lock made from it. */
export declare class Client {
  private constructor()
  /**
   * Connects to `hosts` (`host:port[,host:port...][/chroot]`; the chroot must exist) and
   * establishes a session. Bad arguments reject with ZKLOCK_INVALID_ARGUMENT before any network
   * traffic; no session in time rejects with ZKLOCK_TIMEOUT, whose message names the last cause
   * seen for each host and whose `path` is `hosts`; every server refusing the TLS handshake for
   * the same certificate reason (a wrong CA bundle, say) rejects at once with ZKLOCK_AUTH_FAILED.
   */
  static connect(hosts: string, options?: ConnectOptions): Promise<Client>
  /** The session state now. After an expiry it is `'expired'` until the next acquisition makes a new session. */
  readonly state: SessionState
  /** The session timeout the server granted, in ms (between sessions, the one asked for). */
  readonly sessionTimeoutMs: number
  /** Calls `listener` on each session state change; returns a function that stops it. Never keeps the process alive. */
  onStateChange(listener: (state: SessionState) => void): () => void
  /** A fair, reentrant lock on `path` (relative to the chroot). Throws ZKLOCK_INVALID_ARGUMENT for a bad path. */
  lock(path: string, options?: LockOptions): Lock
  /**
   * A fair read/write lock on `path` (Curator's InterProcessReadWriteLock): many readers at once,
   * or one writer. Throws ZKLOCK_INVALID_ARGUMENT for a bad path.
   */
  readWriteLock(path: string, options?: LockOptions): ReadWriteLock
  /**
   * A counting semaphore on `path` (Curator's InterProcessSemaphoreV2): `{ maxLeases: 3 }`, or
   * the max from a shared count, `{ sharedCount: { path, seed } }`. Throws
   * ZKLOCK_INVALID_ARGUMENT for a bad path, a max of 0, a seed of 0, or both or neither.
   */
  semaphore(path: string, options: SemaphoreOptions): Semaphore
  /**
   * Several locks taken together, all or none (Curator's InterProcessMultiLock, without its
   * deadlock): Locks (mutexes, or a ReadWriteLock's `read` or `write`) and semaphore leases.
   * Throws ZKLOCK_INVALID_ARGUMENT for no member, two members on one path, 0 leases or more
   * than a fixed max.
   */
  multiLock(members: readonly MultiLockMember[]): MultiLock
  /** Ends the session at once: its lock nodes go, pending acquisitions reject with ZKLOCK_CLOSED, holds are lost. Idempotent. */
  close(): Promise<void>
}

/**
 * A fair, reentrant lock. Reentrancy follows the async call chain: inside `withLock` (or
 * `hold.run`), nested `withLock`/`acquire` calls re-enter at once, with no ZooKeeper traffic, on
 * the same Lock object or on any other Lock of the client for the path (with the same identifier
 * and ACL: `client.lock(path)` made anew in a helper called inside itself re-enters). Through a
 * Lock of another identifier or ACL such a call rejects with ZKLOCK_DEADLOCK at once: it would
 * wait for itself. Everywhere else each call is a contender of its own, so two independent async
 * flows exclude each other, first come first served, even on one Lock object.
 */
export declare class Lock {
  private constructor()
  readonly path: string
  /** `'exclusive'` for `client.lock`, `'read'` or `'write'` for the sides of a read/write lock. */
  readonly mode: LockMode
  /**
   * Whether this Lock object holds the lock and may act on it (`state === 'held'`): false while
   * `'suspended'` (the node may still be ours, but the server may be about to let the next holder
   * in) and once `'lost'` (`state` then says so until released).
   */
  readonly isHeld: boolean
  /**
   * The state of this Lock object's hold, or null if it holds none: the current flow's if it
   * holds (readers may hold together), else the latest hold not yet released.
   */
  readonly state: Exclude<HoldState, 'released'> | null
  /**
   * Resolves to a Hold, or to `null` if `timeoutMs` passed first (so without a `timeoutMs`, to a
   * Hold, however long that takes: through outages and new sessions). Inside `withLock`/`hold.run` of this lock it re-enters; anywhere else it is a new
   * contender. Rejects with an AbortError if `signal` aborts.
   */
  acquire(options?: AcquireOptions & { timeoutMs?: undefined }): Promise<Hold>
  acquire(options: AcquireOptions): Promise<Hold | null>
  /**
   * Runs `fn(hold)` holding the lock, as the hold's owner (nested calls in it re-enter), and
   * releases when `fn` settles. Rejects with ZKLOCK_TIMEOUT if `timeoutMs` passed first. If `fn`
   * throws, its error is passed on (a failed release is attached as `releaseError`); if `fn`
   * succeeds but the release fails (the lock was lost meanwhile: ZKLOCK_LOCK_LOST), it rejects
   * with the release's error.
   */
  withLock<T>(fn: (hold: Hold) => T | PromiseLike<T>, options?: AcquireOptions): Promise<Awaited<T>>
  /** Releases one level of the current flow's hold (inside `withLock`/`hold.run`); ZKLOCK_NOT_OWNER elsewhere. */
  release(): Promise<void>
  /** The current holder (the first, if readers hold together), or null. */
  holder(): Promise<Participant | null>
  /** Every participant holding now, in queue order: the readers holding together, or the one holder. */
  holders(): Promise<Participant[]>
  /** Every contender, holder first, in queue order. */
  contenders(): Promise<Participant[]>
  /**
   * Calls `listener(reason)` once for each hold of this lock that is lost: every hold, by any
   * async flow, taken before it was registered (unless lost already) or after, through this Lock
   * or another of the client for the path (the core's rule, the same in every language). Returns
   * a function that stops it. Listening never keeps the process alive.
   */
  onLost(listener: (reason: LostReason) => void): () => void
}

/**
 * A fair read/write lock (Curator's InterProcessReadWriteLock, node for node): many readers at
 * once, or one writer; a reader that comes after a waiting writer waits behind it. `read` and
 * `write` are ordinary Locks whose async flows are one set of owners: the write holder's flow may
 * take the read side (a downgrade: release the write hold and go on reading, while writers
 * already waiting stay out), and a reader's flow asking for the write side rejects at once with
 * ZKLOCK_DEADLOCK. A mutex and a read/write lock cannot share a path (ZKLOCK_INVALID_ARGUMENT).
 */
export declare class ReadWriteLock {
  private constructor()
  readonly path: string
  /** The read side (`mode` `'read'`): shared with other readers. */
  readonly read: Lock
  /** The write side (`mode` `'write'`): exclusive. */
  readonly write: Lock
  /** Every participant, readers and writers, in queue order. */
  contenders(): Promise<Participant[]>
  /** Every participant holding now: the readers holding together, or the one writer. */
  holders(): Promise<Participant[]>
}

/** One level of a held lock. */
export declare class Hold {
  private constructor()
  /** The lock node's creation zxid: strictly rises across successive holders of a path. Pass it to the resource you protect. Throws ZKLOCK_LOCK_LOST once the lock is lost and ZKLOCK_NOT_OWNER once released: such a token must not pass for a holder's. */
  readonly fencingToken: bigint
  /** The lock node's sequence number. */
  readonly sequence: number
  readonly state: HoldState
  /** Aborts when the lock is lost (never on release); its reason is a LockLostError. Pass it to fetch or other abortable work. */
  readonly signal: AbortSignal
  /**
   * Releases this level; the last level deletes the node and resolves once the server confirmed
   * it. Rejects with ZKLOCK_NOT_OWNER if this hold was already released, ZKLOCK_LOCK_LOST if the
   * lock was lost (nothing is deleted then), ZKLOCK_CONNECTION_LOSS if the connection dropped
   * first (the node is then deleted in the background, or goes with the session).
   */
  release(): Promise<void>
  /** Runs `fn()` as this hold's owner: calls on the same Lock in it (and what it starts) re-enter. */
  run<T>(fn: () => T): T
  /** Releases, unless already released. */
  [Symbol.asyncDispose](): Promise<void>
}

export interface SemaphoreOptionsBase {
  /** Recorded in each node's identity (see `participants()`). */
  identifier?: string
  /**
   * As a lock's, given to every node the semaphore makes: its path (made persistent, not a
   * container, when it is not `'open'`), its internal mutex and lease parents, the leases and
   * the shared count. A protected semaphore refuses, with ZKLOCK_PERMISSION_DENIED, any of them
   * found with an ACL that grants others more than asked. Default `'open'`, as Curator makes
   * them: anyone may delete a lease or change the count.
   */
  acl?: Acl
}

/** A semaphore's max: a fixed number, or a shared count's value. */
export type SemaphoreOptions = SemaphoreOptionsBase &
  (
    | { /** At most this many leases at once (every user of the path must agree). */ maxLeases: number; sharedCount?: undefined }
    | {
        /**
         * The max is the count at `path`, a 4-byte big-endian int as Curator's SharedCount
         * stores it, made with `seed` if missing: change it at run time (Curator's setCount, or
         * any 4-byte setData) and waiters follow. A node that is not 4 bytes rejects
         * acquisitions with ZKLOCK_INVALID_ARGUMENT.
         */
        sharedCount: { path: string; seed: number }
        maxLeases?: undefined
      }
  )

export interface LeaseAcquireOptions extends AcquireOptions {
  /** How many leases, all or nothing (default 1). More than the max rejects with ZKLOCK_INVALID_ARGUMENT. */
  leases?: number
}

/** Who holds a semaphore's leases and who waits. */
export interface SemaphoreParticipants {
  /** The lease nodes held, in creation order (`mode` absent: a lease is no lock node). */
  holders: Participant[]
  /** The lease nodes of the acquirer at the head of `queue`, made, waiting until they fit. */
  waiting: Participant[]
  /** The acquirers at the internal mutex (`<path>/locks`), in order. */
  queue: Participant[]
  /** The max when listed. */
  maxLeases: number
}

/**
 * A counting semaphore (Curator's InterProcessSemaphoreV2, node for node, so Curator and zklock
 * count the same leases): at most max leases at once. Acquirers are served first come, first
 * served; n leases are taken all or nothing under one deadline. Not reentrant: each acquisition
 * takes leases of its own. With max 1 it is Curator's InterProcessSemaphoreMutex.
 */
export declare class Semaphore {
  private constructor()
  readonly path: string
  /** The max now: the fixed one, or the shared count's value. */
  currentMaxLeases(): Promise<number>
  /** The lease nodes held and waiting, and the queue at the internal mutex. */
  participants(): Promise<SemaphoreParticipants>
  /**
   * Resolves to the leases, or to `null` if `timeoutMs` passed first (one deadline for all of
   * them; every node of the attempt removed); without a `timeoutMs`, to the leases, however long
   * that takes (through outages and new sessions). Rejects with an AbortError if `signal` aborts.
   */
  acquire(options?: LeaseAcquireOptions & { timeoutMs?: undefined }): Promise<Leases>
  acquire(options: LeaseAcquireOptions): Promise<Leases | null>
  /**
   * Runs `fn(leases)` holding the leases and releases them when `fn` settles. Rejects with
   * ZKLOCK_TIMEOUT if `timeoutMs` passed first; errors as `lock.withLock`'s.
   */
  withLease<T>(fn: (leases: Leases) => T | PromiseLike<T>, options?: LeaseAcquireOptions): Promise<Awaited<T>>
}

/**
 * Leases taken together by one acquisition. Held until released, lost, or the client closes
 * (collecting this object does not release them).
 */
export declare class Leases {
  private constructor()
  /** How many leases. */
  readonly count: number
  /** Each lease node's creation zxid, in the order made: they rise across a path's leases. Throws ZKLOCK_LOCK_LOST once one is lost, ZKLOCK_NOT_OWNER once released. */
  readonly fencingTokens: bigint[]
  /** The lease nodes' paths. */
  readonly nodes: string[]
  /** The worst of the leases' states (`'lost'` if one is lost), or `'released'`. */
  readonly state: HoldState
  /** Aborts when a lease is lost (never on release); its reason is a LockLostError. */
  readonly signal: AbortSignal
  /**
   * Deletes every lease node; resolves once the server confirmed each. Rejects with
   * ZKLOCK_NOT_OWNER if already released, ZKLOCK_LOCK_LOST if a lease was lost (the others are
   * still deleted).
   */
  release(): Promise<void>
  /** Releases, unless already released. */
  [Symbol.asyncDispose](): Promise<void>
}

/** What a multi-lock member takes: a mutex, a side of a read/write lock, or leases. */
export type MemberKind = 'mutex' | 'read' | 'write' | 'leases'

/** A member of `client.multiLock`: a Lock, or `leases` (default 1) of a semaphore. */
export type MultiLockMember = Lock | { semaphore: Semaphore; leases?: number }

/** A multi-lock member: where, what it takes there, and how many (leases; 1 for a lock). */
export interface MemberInfo {
  readonly path: string
  readonly kind: MemberKind
  readonly count: number
}

/** The reason of an aborted `multiHold.signal`: names the member lost. */
export interface MemberLostError extends LockLostError {
  member: { path: string; kind: MemberKind }
}

/**
 * Several locks taken together, all or none, in one canonical order (by path, then kind) so that
 * two multi-locks over the same paths never deadlock, under one deadline; released in reverse
 * order. A flow that holds a member lock re-enters it, as a thread or task does in Python and C
 * (members held through separate acquisitions are refused with ZKLOCK_DEADLOCK: it would wait on
 * itself); any other acquisition is a new owner of the member locks.
 */
export declare class MultiLock {
  private constructor()
  /** The members in the order they are taken. */
  readonly members: readonly MemberInfo[]
  /**
   * Resolves to a MultiHold, or to `null` if `timeoutMs` passed first (`0`: each member tried
   * once), with what was taken released; without a `timeoutMs`, to a MultiHold, however long that
   * takes (through outages and new sessions). Rejects with an AbortError if `signal` aborts.
   */
  acquire(options?: AcquireOptions & { timeoutMs?: undefined }): Promise<MultiHold>
  acquire(options: AcquireOptions): Promise<MultiHold | null>
  /**
   * Runs `fn(multiHold)` holding every member, as their owner (nested calls on a member lock
   * re-enter), and releases when `fn` settles. Rejects with ZKLOCK_TIMEOUT if `timeoutMs` passed
   * first; errors as `lock.withLock`'s.
   */
  withLocks<T>(fn: (held: MultiHold) => T | PromiseLike<T>, options?: AcquireOptions): Promise<Awaited<T>>
}

/** Every member of a multi-lock, held until released, lost, or the client closes. */
export declare class MultiHold {
  private constructor()
  /** Each member's fencing tokens (one for a lock, one per lease), in canonical order. Throws ZKLOCK_LOCK_LOST once a member is lost, ZKLOCK_NOT_OWNER once released. */
  readonly fencingTokens: Array<{ path: string; kind: MemberKind; tokens: bigint[] }>
  /** `'lost'` if any member is, else `'suspended'` if any is, else `'held'`; `'released'` once released. */
  readonly state: HoldState
  /** The first member (in canonical order) found lost, or null. */
  readonly lostMember: { path: string; kind: MemberKind; lostReason: LostReason } | null
  /** Aborts when a member is lost (never on release); its reason is a MemberLostError naming it. */
  readonly signal: AbortSignal
  /**
   * Releases every member in reverse canonical order, each confirmed before the next. Rejects
   * with ZKLOCK_NOT_OWNER if already released, or with the first member's error (ZKLOCK_LOCK_LOST
   * for a lost member) once the others are released.
   */
  release(): Promise<void>
  /** Runs `fn()` as the owner of the member locks: calls on them in it re-enter. */
  run<T>(fn: () => T): T
  /** Releases, unless already released. */
  [Symbol.asyncDispose](): Promise<void>
}

declare const zklock: {
  Client: typeof Client
  Lock: typeof Lock
  ReadWriteLock: typeof ReadWriteLock
  Hold: typeof Hold
  Semaphore: typeof Semaphore
  Leases: typeof Leases
  MultiLock: typeof MultiLock
  MultiHold: typeof MultiHold
  ZkLockError: typeof ZkLockError
  AbortError: typeof AbortError
  codes: typeof codes
  perms: typeof perms
  version: typeof version
}
/**
 * `import zklock from 'zookeeper-lock'`: the same classes as the named exports (also
 * `require('zookeeper-lock').default`, so that TypeScript's CommonJS output without esModuleInterop finds it).
 */
export default zklock
