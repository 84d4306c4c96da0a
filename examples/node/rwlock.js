// Recipes, the read/write lock in Node.
const { Client } = require('zookeeper-lock')

async function main () {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181')
  // ANCHOR: main
  const { read, write } = client.readWriteLock('/locks/catalog') // each a Lock
  await read.withLock(async () => { /* shared with other readers */ })
  await write.withLock(async () => {
    await read.withLock(async () => { /* a downgrade: read under the write */ })
  })
  await read.withLock(async () => {
    await write.acquire().catch((err) => console.log(err.code)) // upgrade refused: ZKLOCK_DEADLOCK
  })
  // ANCHOR_END: main
  await client.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
