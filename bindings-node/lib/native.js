'use strict'
// The native addon (zklock.node, built by build.mjs), loaded once for every file of the layer,
// and what they all share of it: the reentrant fast path, and the token that keeps the classes'
// constructors to the layer itself.

const path = require('node:path')
const { threadId } = require('node:worker_threads')

// The package's root, where the addon lies beside index.js.
const ROOT = path.join(__dirname, '..')

// The addon: the prebuilt one for this platform that a published package carries
// (zklock.<platform>-<arch>[-gnu|-musl].node, napi-rs's naming), or else the one `npm run build`
// made in a source checkout (zklock.node).
function platformName() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`
}
const PLATFORM = platformName()
function loadNative() {
  const { existsSync } = require('node:fs')
  for (const file of [`zklock.${PLATFORM}.node`, 'zklock.node']) {
    if (existsSync(path.join(ROOT, file))) return require(path.join(ROOT, file))
  }
  // The published package carries one prebuilt addon, for Linux x86_64 with glibc 2.17 or newer.
  const what = PLATFORM.endsWith('-musl')
    ? `no prebuilt addon for musl libc (Alpine and the like, ${PLATFORM})`
    : `no prebuilt addon for ${PLATFORM}`
  throw new Error(
    `zookeeper-lock: ${what} in ${ROOT}: this package carries only zklock.linux-x64-gnu.node, for Linux x86_64 ` +
      'with glibc 2.17 or newer. Build the addon from source, with a Rust toolchain: in a checkout of the ' +
      'zklock repository, `npm run build` in bindings-node, then `npm install ./bindings-node`',
  )
}
const native = loadNative()
// Owner labels (in messages and lock nodes) name the worker thread as well as the async flow.
native.setThreadId(threadId)
// The reentrant fast path: plain Node-API functions of numbers (see `fast_path` in src/lock.rs).
const fast = native.fastPath()

// What the constructors of the public classes take first: users make them through the client.
const CONSTRUCT = Symbol('zklock.construct')

module.exports = { native, fast, CONSTRUCT }
