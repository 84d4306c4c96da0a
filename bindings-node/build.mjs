// Builds the addon: `cargo build -p zklock-node` into the workspace's shared target/ (for the host,
// with no --target, so it reuses the dependencies every other build of the workspace compiled),
// then copies the cdylib next to index.js as zklock.node, the file index.js loads.
//
//   node build.mjs            # debug (what scripts/test-node uses)
//   node build.mjs --release  # release (npm run build; the benchmark)
//   node build.mjs --release --print-path  # only build, and print the library's path
//   node build.mjs --release --print-path --glibc 2.17
//       # linked against glibc 2.17 by zig (scripts/zig-glibc: cargo-zigbuild and zig on PATH), in
//       # target/glibc-2.17/ with the wheel and the C library, so the addon loads on any
//       # glibc >= 2.17 (scripts/package)
import { spawnSync } from 'node:child_process'
import { copyFileSync, renameSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
let command = [process.env.CARGO ?? 'cargo', 'build', '-p', 'zklock-node', '--message-format=json-render-diagnostics']
if (process.argv.includes('--release')) command.push('--release')
const glibc = process.argv.indexOf('--glibc')
if (glibc !== -1) {
  const version = process.argv[glibc + 1]
  if (process.platform !== 'linux' || !['x64', 'arm64'].includes(process.arch) || !/^2\.\d+$/.test(version ?? '')) {
    console.error(`build.mjs: --glibc 2.N is for Linux x64 or arm64 (here ${process.platform}-${process.arch}, ${version})`)
    process.exit(2)
  }
  command = [join(here, '..', 'scripts', 'zig-glibc'), version, ...command]
}
const cargo = spawnSync(command[0], command.slice(1), {
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
  // Copied beside it, then renamed over it: a process that has the old one loaded keeps its
  // file, where a copy in place would truncate what it has mapped (SIGBUS: a test run beside
  // a build died so).
  const staged = join(here, `zklock.node.${process.pid}.tmp`)
  copyFileSync(library, staged)
  renameSync(staged, join(here, 'zklock.node'))
  console.error(`build.mjs: ${library} -> zklock.node`)
}
