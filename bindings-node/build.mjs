// Builds the addon: `cargo build -p zklock-node` into the workspace's shared target/ (for the host,
// with no --target, so it reuses the dependencies every other build of the workspace compiled),
// then copies the cdylib next to index.js as zklock.node, the file index.js loads.
//
//   node build.mjs            # debug (what scripts/test-node uses)
//   node build.mjs --release  # release (npm run build; the benchmark)
//   node build.mjs --release --print-path  # only build, and print the library's path (scripts/package)
import { spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const args = ['build', '-p', 'zklock-node', '--message-format=json-render-diagnostics']
if (process.argv.includes('--release')) args.push('--release')
const cargo = spawnSync(process.env.CARGO ?? 'cargo', args, {
  cwd: here,
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
  maxBuffer: 1 << 28,
})
if (cargo.error) throw cargo.error
if (cargo.status !== 0) process.exit(cargo.status ?? 1)

// The artifact's path comes from cargo itself, wherever the target dir is.
const library = cargo.stdout
  .split('\n')
  .filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line))
  .filter((message) => message.reason === 'compiler-artifact' && message.target.name === 'zklock_node')
  .flatMap((message) => message.filenames)
  .find((file) => /\.(so|dylib|dll)$/.test(file))
if (!library) {
  console.error('build.mjs: cargo built no zklock_node library')
  process.exit(1)
}
if (process.argv.includes('--print-path')) {
  console.log(library)
} else {
  copyFileSync(library, join(here, 'zklock.node'))
  console.error(`build.mjs: ${library} -> zklock.node`)
}
