// Several processes: FIFO order across them, and processes that exit by themselves.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { Client } from 'zookeeper-lock'
import { ZK, uniquePath, ephemeralsUnder, nodesBecome, runScript } from './helpers.mjs'

let client
before(async () => {
  client = await Client.connect(ZK)
})
after(async () => {
  await client.close()
})

test('FIFO order across processes (child_process contenders, CommonJS entry)', async () => {
  const lockPath = uniquePath('fifo')
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'zklock-node-')), 'turns')
  fs.writeFileSync(log, '')
  const hold = await client.lock(lockPath).acquire()
  const children = []
  for (let i = 0; i < 4; i++) {
    children.push(runScript('contender.cjs', [lockPath, log, String(i)]))
    // The next process starts only once this one's node is queued.
    await nodesBecome(lockPath, i + 2)
  }
  await hold.release()
  for (const child of children) {
    const { code, stderr } = await child.exited
    assert.equal(code, 0, stderr)
  }
  assert.deepEqual(fs.readFileSync(log, 'utf8').trim().split('\n'), ['0', '1', '2', '3'])
  assert.deepEqual(await ephemeralsUnder(lockPath), [])
  fs.rmSync(path.dirname(log), { recursive: true })
})

for (const ending of ['end of script', 'process.exit']) {
  test(`a script that forgets to close exits by itself, and its session ends (${ending})`, async () => {
    const lockPath = uniquePath('forgets')
    let heldAt
    const run = runScript('forgets-close.mjs', [lockPath, ending], {
      timeoutMs: 10000,
      onLine: (line) => line.startsWith('HELD') && (heldAt = Date.now()),
    })
    const { code, stderr, lines } = await run.exited
    const exitedAt = Date.now()
    assert.equal(code, 0, stderr)
    assert.ok(heldAt, `the script acquired: ${lines}`)
    assert.ok(exitedAt - heldAt < 5000, `exited ${exitedAt - heldAt} ms after its script ended`)
    // The session had a 30 s timeout: its node goes this fast only because it was closed.
    await nodesBecome(lockPath, 0, 3000)
    assert.ok(!lines.includes('LOST'), 'no callback into JavaScript during teardown')
  })
}

test('a pending acquire keeps the process alive while pending, and no longer', async () => {
  const lockPath = uniquePath('pending')
  const hold = await client.lock(lockPath).acquire()
  const started = Date.now()
  const run = runScript('waits.mjs', [lockPath, '1500'], { timeoutMs: 10000 })
  const { code, stderr, lines } = await run.exited
  assert.equal(code, 0, stderr)
  assert.deepEqual(lines, ['WAITING', 'RESULT null'])
  assert.ok(Date.now() - started >= 1500, 'the process waited for its acquisition')
  await hold.release()
  await nodesBecome(lockPath, 0)
})
