// The example of the npm page (bindings-node/README.md).
// ANCHOR: main
const { Client } = require('zookeeper-lock')

async function main () {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181')
  await client.lock('/locks/nightly-report').withLock(async (hold) => {
    console.log('holding, fencing token', hold.fencingToken) // hold.signal aborts if lost
  })
  await client.close()
}
main()
// ANCHOR_END: main
