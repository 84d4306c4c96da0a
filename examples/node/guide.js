// Node, the whole API: the blocks of the Node guide page, run in order.
const { Client } = require('zookeeper-lock')

async function main () {
  const hosts = process.env.ZK_CONNECT ?? '127.0.0.1:2181'
  // ANCHOR: use
  const client = await Client.connect(hosts, { sessionTimeoutMs: 10000 })
  const lock = client.lock('/locks/nightly-report', { identifier: 'report-job' })

  await lock.withLock(async (hold) => { // waits as long as it takes; releases when fn settles
    console.log('token', String(hold.fencingToken), 'aborted if lost:', hold.signal.aborted)
    await lock.withLock(async () => { /* re-entry: no ZooKeeper traffic */ })
  })

  const hold = await lock.acquire({ timeoutMs: 5000, signal: AbortSignal.timeout(10000) })
  if (hold) { // null: not obtained within timeoutMs (0 = only try)
    try { /* work */ } finally { await hold.release() }
  }
  // ANCHOR_END: use
  // ANCHOR: signals
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.once(signal, async () => {
      await client.close() // pending acquisitions reject with ZKLOCK_CLOSED
      process.exit(0)
    })
  }
  // ANCHOR_END: signals
  // ANCHOR: rwlock
  const table = client.readWriteLock('/locks/table')

  await table.read.withLock(async () => { /* many readers at once */ })
  await table.write.withLock(async () => { /* one writer, no reader */ })

  // Downgrade: take the read side in the writer's flow, then let the write side go.
  const write = await table.write.acquire()
  const read = await write.run(() => table.read.acquire()) // no new node: it reads on the write node
  await write.release() // still reading; waiting writers stay out
  await read.release() // now the next writer gets in
  // ANCHOR_END: rwlock
  // ANCHOR: semaphore
  const pool = client.semaphore('/jobs/nightly', { maxLeases: 3 }) // or { sharedCount: { path, seed } }
  await pool.withLease(async (leases) => { // both leases, or neither; released when fn settles
    console.log('tokens', leases.fencingTokens.map(String), 'aborted if lost:', leases.signal.aborted)
  }, { leases: 2, timeoutMs: 30000 }) // ZKLOCK_TIMEOUT if not had in time
  const leases = await pool.acquire({ leases: 1, timeoutMs: 0 }) // Leases, or null
  if (leases) await leases.release()
  console.log(await pool.participants()) // { holders, waiting, queue, maxLeases }

  const [from, to] = [client.lock('/accounts/alice'), client.lock('/accounts/bob')]
  const transfer = client.multiLock([to, from, { semaphore: pool, leases: 1 }])
  console.log(transfer.members) // taken in this order: by path, then kind
  await transfer.withLocks(async (held) => { // every member, or none, under one deadline
    held.signal.addEventListener('abort', () => console.log('lost:', held.signal.reason.member))
    await from.withLock(async () => {}) // a member lock re-enters inside withLocks
  }, { timeoutMs: 10000 })
  // ANCHOR_END: semaphore
  await client.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
