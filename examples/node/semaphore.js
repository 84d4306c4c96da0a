// Recipes, the semaphore and the multi-lock in Node.
const { Client } = require('zookeeper-lock')

async function main () {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181')
  // ANCHOR: semaphore
  const pool = client.semaphore('/jobs/nightly', { maxLeases: 3 }) // or { sharedCount: { path, seed } }
  await pool.withLease(async (leases) => { // both, or neither; released when fn settles
    console.log('fencing tokens', leases.fencingTokens, 'aborted if lost:', leases.signal.aborted)
  }, { leases: 2, timeoutMs: 30000 })
  // ANCHOR_END: semaphore
  // ANCHOR: multi
  const transfer = client.multiLock([client.lock('/accounts/bob'), client.lock('/accounts/alice'),
    { semaphore: pool, leases: 1 }]) // taken sorted by path
  await transfer.withLocks(async (held) => { /* held.signal's reason names the member lost */ })
  // ANCHOR_END: multi
  await client.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
