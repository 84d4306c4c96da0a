// Uses the whole public API under `tsc --strict`: the declarations must be self-sufficient.
import zklock, {
  Client,
  Lock,
  ReadWriteLock,
  Hold,
  ZkLockError,
  AbortError,
  codes,
  perms,
  version,
  type Acl,
  type AclEntry,
  type LockMode,
  type Participant,
  type ZklockError,
  type LockLostError,
  type SaslOptions,
  type TlsOptions,
  Semaphore,
  Leases,
  MultiLock,
  MultiHold,
  type MemberKind,
  type MemberLostError,
  type SemaphoreParticipants,
} from 'zookeeper-lock'

async function main(): Promise<void> {
  const client: Client = await Client.connect('127.0.0.1:2181/app', {
    sessionTimeoutMs: 10000,
    connectTimeoutMs: 5000,
    auth: 'user:password',
    juteMaxbuffer: 4 << 20,
    sasl: { mechanism: 'DIGEST-MD5', username: 'alice', password: 'secret' },
  })
  const kerberos: SaslOptions = { mechanism: 'GSSAPI', principal: 'alice@EXAMPLE.COM', keytab: '/etc/zk/alice.keytab' }
  void kerberos
  const tls: TlsOptions = { ca: [Buffer.from('PEM'), 'PEM'], cert: 'PEM', key: Buffer.from('PEM'), passphrase: 'pw', rejectUnauthorized: true, servername: 'zk1' }
  await Client.connect('zk1:2281', { tls })
  const stop: () => void = client.onStateChange((state) => console.log(state.toUpperCase()))
  const lock: Lock = client.lock('/locks/report', { identifier: 'job' })
  const controller = new AbortController()
  const hold: Hold | null = await lock.acquire({ timeoutMs: 5000, signal: controller.signal })
  if (hold) {
    const token: bigint = hold.fencingToken
    hold.signal.addEventListener('abort', () => {
      const reason = hold.signal.reason as LockLostError
      console.log(reason.lostReason, token)
    })
    await hold.run(async () => lock.withLock(async (inner) => inner.sequence))
    await hold.release()
  }
  const result: number = await lock.withLock(async (h) => h.sequence, { timeoutMs: 1000 })
  {
    // With no timeout, acquire resolves to a Hold: `await using` needs no check (the README's example).
    await using scoped = await lock.acquire()
    console.log(scoped.state)
  }
  {
    // With a timeout too (null on a timeout, which `await using` takes): TS2851 while it was false.
    await using timed = await lock.acquire({ timeoutMs: 1000 })
    console.log(timed?.state)
  }
  const surely: Hold = await lock.acquire({ signal: controller.signal })
  await surely.release()
  const state: 'held' | 'suspended' | 'lost' | null = lock.state
  const held: boolean = lock.isHeld
  const holder = await lock.holder()
  if (holder?.identity) console.log(holder.identity.owner, holder.data.length, holder.fencingToken)
  for (const p of await lock.contenders()) console.log(p.node, p.sessionId)
  try {
    await lock.release()
  } catch (error) {
    if ((error as ZklockError).code === codes.NOT_OWNER) console.log('not owner')
    if (error instanceof ZkLockError && error.code === codes.LOCK_LOST) console.log(error.lostReason?.length)
    if (error instanceof AbortError) console.log(error.cause)
  }
  const rw: ReadWriteLock = client.readWriteLock('/locks/table', { identifier: 'job' })
  const sides: [Lock, Lock] = [rw.read, rw.write]
  const modes: LockMode[] = sides.map((side) => side.mode)
  await rw.write.withLock(async () => {
    const reading = await rw.read.acquire({ timeoutMs: 0 })
    if (reading) await reading.release()
  })
  try {
    await rw.read.withLock(async () => rw.write.acquire())
  } catch (error) {
    if ((error as ZklockError).code === codes.DEADLOCK) console.log('upgrade refused')
  }
  const protectedLock: Lock = client.lock('/locks/private', { acl: 'creatorAllWorldRead' })
  const entries: AclEntry[] = [
    { perms: perms.ALL, scheme: 'digest', id: 'user:base64-of-sha1' },
    { perms: perms.READ | perms.CREATE | perms.DELETE, scheme: 'world', id: 'anyone' },
  ]
  const custom: Acl = entries
  const protectedRw: ReadWriteLock = client.readWriteLock('/locks/shared', { identifier: 'job', acl: custom })
  try {
    await protectedLock.withLock(async () => protectedRw.write.acquire())
  } catch (error) {
    if ((error as ZklockError).code === codes.PERMISSION_DENIED) console.log('the lock path is not ours')
  }
  const readers: Participant[] = await rw.read.holders()
  const all: Participant[] = await rw.contenders()
  const mode: LockMode | undefined = (await rw.holders())[0]?.mode
  console.log(rw.path, modes, readers.length, all.length, mode, zklock.ReadWriteLock === ReadWriteLock)
  stop()
  console.log(result, state, held, zklock.codes.TIMEOUT, zklock.perms.ALL)
  const semaphore: Semaphore = client.semaphore('/jobs/nightly', { maxLeases: 3, identifier: 'job' })
  const shared: Semaphore = client.semaphore('/jobs/shared', { sharedCount: { path: '/jobs/shared-max', seed: 3 } })
  const max: number = await shared.currentMaxLeases()
  const leases: Leases | null = await semaphore.acquire({ leases: 2, timeoutMs: 5000, signal: controller.signal })
  if (leases) {
    const tokens: bigint[] = leases.fencingTokens
    console.log(leases.count, leases.nodes[0], leases.state, leases.signal.aborted, tokens[0])
    await leases.release()
  }
  {
    await using one = await semaphore.acquire()
    console.log(one.count)
    await using tried = await semaphore.acquire({ timeoutMs: 0 })
    console.log(tried?.count)
    await using all = await client.multiLock([lock]).acquire({ timeoutMs: 0 })
    console.log(all?.signal.aborted)
  }
  const counted: number = await semaphore.withLease(async (held) => held.count, { leases: 1, timeoutMs: 1000 })
  const seen: SemaphoreParticipants = await semaphore.participants()
  console.log(max, counted, seen.holders.length, seen.waiting.length, seen.queue[0]?.sessionId, seen.maxLeases)
  const multi: MultiLock = client.multiLock([lock, rw.write, { semaphore, leases: 1 }, { semaphore: shared }])
  const kinds: MemberKind[] = multi.members.map((member) => member.kind)
  const multiHold: MultiHold | null = await multi.acquire({ timeoutMs: 1000 })
  if (multiHold) {
    multiHold.signal.addEventListener('abort', () => {
      const reason = multiHold.signal.reason as MemberLostError
      console.log(reason.member.path, reason.member.kind, reason.lostReason)
    })
    const lostPath: string | undefined = multiHold.lostMember?.path
    console.log(multiHold.state, multiHold.fencingTokens[0]?.tokens[0], lostPath, kinds)
    await multiHold.run(async () => lock.withLock(async () => {}))
    await multiHold.release()
  }
  const inside: string = await multi.withLocks(async (held) => held.state, { signal: controller.signal })
  console.log(inside, zklock.Semaphore === Semaphore, zklock.MultiHold === MultiHold)
  const parts: string[] = [version, zklock.version].map((v) => v.split('.')[0])
  console.log(parts)
  await client.close()
}

void main()
