// Builds the addon: `cargo build -p zklock-node` into the workspace's shared target/ (for the host,
// with no --target, so it reuses the dependencies every other build of the workspace compiled),
// then copies the cdylib next to index.js as zklock.node, the file index.js loads.
//
//   node build.mjs            # debug (what scripts/test-node uses)
//   node build.mjs --release  # release (npm run build; the benchmark)
//   node build.mjs --release --print-path  # only build, and print the library's path
//   node build.mjs --release --print-path --glibc 2.17
//       # linked against glibc 2.17 by zig (`cargo zigbuild --target x86_64-unknown-linux-gnu.2.17`,
//       # cargo-zigbuild and zig on PATH), so the addon loads on any glibc >= 2.17 (scripts/package)
import { spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const args = ['build', '-p', 'zklock-node', '--message-format=json-render-diagnostics']
if (process.argv.includes('--release')) args.push('--release')
const glibc = process.argv.indexOf('--glibc')
if (glibc !== -1) {
  const version = process.argv[glibc + 1]
  const arch = { x64: 'x86_64', arm64: 'aarch64' }[process.arch]
  if (process.platform !== 'linux' || !arch || !/^2\.\d+$/.test(version ?? '')) {
    console.error(`build.mjs: --glibc 2.N is for Linux x64 or arm64 (here ${process.platform}-${process.arch}, ${version})`)
    process.exit(2)
  }
  args[0] = 'zigbuild'
  args.push('--target', `${arch}-unknown-linux-gnu.${version}`)
}
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
