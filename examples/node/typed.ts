// Getting started, TypeScript: the same lock, type-checked with tsc --strict and run.
// ANCHOR: main
import { Client, ZkLockError, type Hold } from 'zookeeper-lock'

async function main (): Promise<void> {
  const client = await Client.connect(process.env.ZK_CONNECT ?? '127.0.0.1:2181')
  try {
    const token: bigint = await client.lock('/locks/typed').withLock(async (hold: Hold) => hold.fencingToken)
    console.log('held with fencing token', token)
  } catch (err) {
    if (err instanceof ZkLockError) console.error(err.code, err.message)
    throw err
  } finally {
    await client.close()
  }
}
main().catch(() => { process.exitCode = 1 })
// ANCHOR_END: main
