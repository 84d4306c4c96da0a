// A Node worker of the README demo: holds /zklock-demo/lock ROUNDS times and prints one line per
// hold in the demo's format, `HELD name pid token sequence enter_us exit_us node`.
//
// Usage: ZK_CONNECT=host:port node demo_worker.mjs NAME ROUNDS
// (An application would `import { Client } from 'zookeeper-lock'`; the demo runs from the source tree.)
import { Client } from '../../bindings-node/index.mjs'
import { setTimeout as sleep } from 'node:timers/promises'

// Microseconds since the epoch, as the other workers print them.
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

const [name, rounds] = [process.argv[2], Number(process.argv[3])]
const client = await Client.connect(process.env.ZK_CONNECT)
const lock = client.lock('/zklock-demo/lock')
for (let i = 0; i < rounds; i++) {
  await lock.withLock(async (hold) => {
    const entered = nowUs()
    await sleep(50) // the protected work: hold briefly so the others queue up
    const exited = nowUs()
    console.log(`HELD ${name} ${process.pid} ${hold.fencingToken} ${hold.sequence} ${entered} ${exited} node`)
  })
}
await client.close()
