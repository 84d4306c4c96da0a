// The README's Node example: take a lock, use its fencing token, release it.
// ANCHOR: main
const { Client } = require('zookeeper-lock') // or: import { Client } from 'zookeeper-lock'

async function main () {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181', { sessionTimeoutMs: 10000 })
  const lock = client.lock('/locks/nightly-report')
  await lock.withLock(async (hold) => { // released when the function settles
    console.log('holding, fencing token', hold.fencingToken, 'aborted if lost:', hold.signal.aborted)
    await lock.withLock(async () => {}) // nested: re-enters, no ZooKeeper traffic
  })
  const hold = await lock.acquire({ timeoutMs: 5000 }) // a Hold, or null on timeout
  if (hold) await hold.release()
  await client.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
// ANCHOR_END: main
