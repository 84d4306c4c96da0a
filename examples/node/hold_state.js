// Concepts, hold state: a hold's signal aborts the work when the lock is lost.
const { Client } = require('zookeeper-lock')

async function write (what, { token, signal }) {
  signal.throwIfAborted() // a lost lock stops the work before it writes
  return `${what} written with token ${token}`
}

async function main () {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181')
  const lock = client.lock('/locks/hold-state')
  // ANCHOR: main
  const stop = lock.onLost((reason) => console.log('lock lost:', reason)) // stop() unsubscribes
  await lock.withLock(async (hold) => {
    console.log(hold.state) // 'held', 'suspended' or 'lost'
    console.log(await write('report', { token: hold.fencingToken, signal: hold.signal }))
  })
  stop()
  // ANCHOR_END: main
  await client.close()
}
main().catch((err) => { console.error(err); process.exit(1) })
