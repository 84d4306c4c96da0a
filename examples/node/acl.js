// Security, ACLs in Node: a lock only clients with the same digest credentials may take.
const { Client } = require('zookeeper-lock')

async function main () {
  const hosts = process.env.ZK_CONNECT ?? '127.0.0.1:2181'
  // ANCHOR: main
  const client = await Client.connect(hosts, { auth: 'app:secret' })
  const lock = client.lock('/locks/report-protected', { acl: 'creatorAllWorldRead' }) // or 'creatorAll', 'open'
  await lock.withLock(async () => {})
  // ANCHOR_END: main
  await client.close()
  const stranger = await Client.connect(hosts) // no credentials: refused
  const err = await stranger.lock('/locks/report-protected').acquire({ timeoutMs: 5000 }).catch((e) => e)
  if (err?.code !== 'ZKLOCK_PERMISSION_DENIED') throw new Error(`a stranger was not refused: ${err}`)
  await stranger.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
