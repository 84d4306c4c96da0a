// The end of a process (or worker thread) while zklock's callbacks are reported, running or busy
// (issue 45, item 5, as the Python suite's test_exit.py): process.exit() inside a state-change or
// lost listener and outside one while both are due, the end of the event loop with a client open
// or its close not awaited, a worker terminated (or the process exiting) while its client's
// listeners are due or one is busy for good. Each trigger runs ZKLOCK_NODE_EXIT_RUNS times
// (default 20; 4 processes at a time): every run must end by itself with exit code 7, no signal
// (a crash), no hang (killed after 15 s), and leave no lock node behind.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { uniquePath, runScript, nodesBecome } from './helpers.mjs'

const RUNS = Number(process.env.ZKLOCK_NODE_EXIT_RUNS ?? 20)
const TRIGGERS = [
  'state-exit-inside',
  'lost-exit-inside',
  'exit-outside',
  'exit-while-reporting',
  'end-open',
  'end-closing',
  'worker-terminate',
  'worker-terminate-busy',
  'worker-terminate-open',
  'worker-process-exit',
  'worker-busy-process-exit',
]

test(`every trigger, ${RUNS} runs each: the process ends by itself with its exit code, no crash, no hang`, { timeout: 900000 }, async () => {
  const jobs = TRIGGERS.flatMap((trigger) => Array.from({ length: RUNS }, () => trigger))
  const failures = new Map()
  const paths = []
  let slowest = 0
  const worker = async () => {
    for (let job = jobs.shift(); job !== undefined; job = jobs.shift()) {
      const path = uniquePath(`exit-${job}`)
      paths.push(path)
      const started = Date.now()
      let outcome
      try {
        const { code, signal, stderr } = await runScript('exit-child.mjs', [job, path], { timeoutMs: 15000 }).exited
        outcome = code === 7 ? null : `exit code ${code}, signal ${signal}: ${stderr.slice(-300)}`
      } catch (error) {
        outcome = error.message.slice(0, 300) // did not exit: killed
      }
      slowest = Math.max(slowest, Date.now() - started)
      if (outcome !== null) {
        const seen = failures.get(job) ?? { count: 0, first: outcome }
        seen.count++
        failures.set(job, seen)
      }
    }
  }
  await Promise.all(Array.from({ length: 4 }, worker))
  console.log(`# ${TRIGGERS.length * RUNS} runs; the slowest took ${slowest} ms`)
  assert.deepEqual(Object.fromEntries(failures), {}, `runs that did not end with exit code 7, of ${RUNS} per trigger`)
  // Every session ended with its process (closed at exit, not timed out 30 s later).
  for (const path of paths) await nodesBecome(path, 0, 5000)
})
