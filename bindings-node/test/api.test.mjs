// The API's surface: the declarations compile with tsc --strict on their own and agree with the
// code, the package carries what it loads, internals are out of reach, errors point at the
// caller's line, a shared AbortSignal draws no warning, owner labels name the worker thread, and
// a lost hold is not re-entered or released as if held.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Worker } from 'node:worker_threads'

import { Client, Lock, ReadWriteLock, Hold, ZkLockError, AbortError, codes } from 'zookeeper-lock'
import { ZK, REPO, uniquePath, ephemeralsUnder, nodesBecome } from './helpers.mjs'

const PKG = path.join(REPO, 'bindings-node')

test('index.d.ts compiles under tsc --strict with no lib or types settings of the program', () => {
  const tsc = createRequire(path.join(PKG, 'package.json')).resolve('typescript/bin/tsc')
  // Throws (with tsc's diagnostics) on any error.
  execFileSync(process.execPath, [tsc, '-p', path.join(PKG, 'test/types/tsconfig.json')], { encoding: 'utf8' })
})

// A user's program, as each setting compiles it: the default import and the named ones are the
// same classes, and ZkLockError is constructed as it is at run time.
const USER_PROGRAM = `import zklock, { Client, ZkLockError, codes } from 'zookeeper-lock'
const error = new ZkLockError('made by the program', codes.TIMEOUT, { path: '/p' })
// @ts-expect-error: the constructor takes the code too
void new ZkLockError('no code')
console.log(JSON.stringify([typeof zklock.Client, zklock.Client === Client, error instanceof zklock.ZkLockError, error.code, error.path]))
`

test('a TypeScript program compiles and runs against the package under CommonJS and ESM settings', () => {
  const tsc = createRequire(path.join(PKG, 'package.json')).resolve('typescript/bin/tsc')
  // A project of its own, with the package installed as npm links it.
  const dir = mkdtempSync(path.join(tmpdir(), 'zklock-ts-'))
  try {
    mkdirSync(path.join(dir, 'node_modules'))
    symlinkSync(PKG, path.join(dir, 'node_modules', 'zookeeper-lock'), 'dir')
    const settings = [
      ['program.ts', 'program.js', ['--module', 'commonjs', '--moduleResolution', 'node10']],
      ['program.ts', 'program.js', ['--module', 'commonjs', '--moduleResolution', 'node10', '--esModuleInterop']],
      ['program.cts', 'program.cjs', ['--module', 'nodenext', '--moduleResolution', 'nodenext']],
      ['program.mts', 'program.mjs', ['--module', 'nodenext', '--moduleResolution', 'nodenext']],
      ['program.mts', 'program.mjs', ['--module', 'es2022', '--moduleResolution', 'bundler']],
    ]
    for (const [source, output, flags] of settings) {
      const what = `${source} with ${flags.join(' ')}`
      const out = path.join(dir, 'out')
      rmSync(out, { recursive: true, force: true })
      writeFileSync(path.join(dir, source), USER_PROGRAM)
      try {
        execFileSync(process.execPath, [tsc, '--strict', '--target', 'es2022', ...flags, '--outDir', out, path.join(dir, source)], {
          cwd: dir,
          encoding: 'utf8',
        })
      } catch (error) {
        assert.fail(`${what} does not compile: ${error.stdout}${error.stderr}`)
      }
      let printed
      try {
        printed = execFileSync(process.execPath, [path.join(out, output)], { cwd: dir, encoding: 'utf8' })
      } catch (error) {
        assert.fail(`${what} compiles but fails at run time: ${error.stderr}`)
      }
      assert.deepEqual(JSON.parse(printed), ['function', true, true, codes.TIMEOUT, '/p'], what)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

// A class member as both surfaces name it: `name` for a property (a field or getter), `name(n)`
// for a method of n parameters (the most any of its declared signatures takes).
const member = (name, parameters) => (parameters === undefined ? name : `${name}(${parameters})`)

// What index.d.ts declares, read with the TypeScript compiler: the module's value exports, each
// exported class's instance and static members, and the keys of each exported constant object.
function declaredSurface() {
  const ts = createRequire(path.join(PKG, 'package.json'))('typescript')
  const file = path.join(PKG, 'index.d.ts')
  const program = ts.createProgram([file], { strict: true, noEmit: true, types: [] })
  const checker = program.getTypeChecker()
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(file))
  // A computed member such as [Symbol.asyncDispose] is named "__@asyncDispose@<id>".
  const nameOf = (symbol) => symbol.escapedName.startsWith('__@') ? `Symbol.${symbol.escapedName.split('@')[1]}` : symbol.name
  // Through the checker: a computed member such as [Symbol.asyncDispose] is bound late, and only
  // the type has it. A class's own members are those declared in its body (not Error's).
  const ownNames = (type, classDeclaration) =>
    type
      .getProperties()
      .filter((p) => p.declarations?.some((d) => d.parent === classDeclaration))
      .map((p) => {
        if (!(p.flags & ts.SymbolFlags.Method)) return member(nameOf(p))
        const signatures = checker.getTypeOfSymbolAtLocation(p, classDeclaration).getCallSignatures()
        return member(nameOf(p), Math.max(...signatures.map((signature) => signature.parameters.length)))
      })
      .sort()
  const values = {}
  const classes = {}
  const objects = {}
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    // `export default zklock` is an alias of the declared constant.
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    const name = exported.name
    if (!(symbol.flags & ts.SymbolFlags.Value)) continue
    values[name] = true
    if (symbol.flags & ts.SymbolFlags.Class) {
      const body = symbol.valueDeclaration
      const instance = ownNames(checker.getDeclaredTypeOfSymbol(symbol), body)
      const statics = ownNames(checker.getTypeOfSymbolAtLocation(symbol, body), body)
      classes[name] = { instance, statics }
    } else {
      const type = checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration)
      if (type.flags & ts.TypeFlags.Object) objects[name] = type.getProperties().map(nameOf).sort()
    }
  }
  return { values: Object.keys(values).sort(), classes, objects }
}

// How many parameters a method's source names (`acquire(options) {...}`: 1), its key skipped
// (`[Symbol.asyncDispose ?? Symbol.for(...)]() {...}`: 0).
function parameterCount(method) {
  const source = method.toString().replace(/^async\s+/, '').replace(/^\*\s*/, '')
  let i = 0
  if (source[0] === '[') {
    for (let depth = 0; i < source.length; i++) {
      if (source[i] === '[') depth++
      else if (source[i] === ']' && --depth === 0) break
    }
  }
  i = source.indexOf('(', i)
  let count = 0
  let empty = true
  for (let depth = 0, j = i; j < source.length; j++) {
    const c = source[j]
    if ('([{'.includes(c)) depth++
    else if (')]}'.includes(c) && --depth === 0) break
    else if (c === ',' && depth === 1) count++
    else if (depth === 1 && !/\s/.test(c)) empty = false
  }
  return empty ? 0 : count + 1
}

// What the package exports at run time, in the same shape.
function runtimeSurface(exported) {
  // A well-known symbol by its name in the declarations (Node 20's Symbol.asyncDispose is its own
  // symbol, described "nodejs.asyncDispose").
  const symbolName = (symbol) =>
    Object.getOwnPropertyNames(Symbol).find((name) => Symbol[name] === symbol)?.replace(/^/, 'Symbol.') ?? symbol.description
  // A method is a function-valued data property; a getter or any other value is a property.
  const described = (target, key, name) => {
    const { value, get } = Object.getOwnPropertyDescriptor(target, key)
    return get === undefined && typeof value === 'function' ? member(name, parameterCount(value)) : member(name)
  }
  const own = (target, skip) =>
    [
      ...Object.getOwnPropertyNames(target).map((key) => [key, key]),
      ...Object.getOwnPropertySymbols(target).map((key) => [key, symbolName(key)]),
    ]
      .filter(([, name]) => !skip.includes(name))
      .map(([key, name]) => described(target, key, name))
      .sort()
  const classes = {}
  const objects = {}
  for (const [name, value] of Object.entries(exported)) {
    if (typeof value === 'function') {
      const instance = own(value.prototype, ['constructor'])
      // A class users construct (AbortError) declares the fields its constructor sets; an Error's
      // own message and stack are Error's declarations. The others refuse construction.
      try {
        instance.push(...own(new value('message', { cause: null }), ['message', 'stack']))
      } catch {}
      classes[name] = { instance: instance.sort(), statics: own(value, ['length', 'name', 'prototype']) }
    } else if (value !== null && typeof value === 'object') {
      objects[name] = Object.keys(value).sort()
    }
  }
  return { classes, objects }
}

test('index.d.ts declares exactly what the package exports: names, class members (methods with their parameters, properties), constant keys', async () => {
  const declared = declaredSurface()
  const required = createRequire(path.join(PKG, 'package.json'))('zookeeper-lock')
  const imported = await import('zookeeper-lock')
  // The module's names: CommonJS, ES module (less its default export) and the declarations agree.
  assert.deepEqual([...Object.keys(required)].sort(), declared.values.filter((n) => n !== 'default'), 'require')
  assert.deepEqual(Object.keys(imported).filter((n) => n !== 'default').sort(), declared.values.filter((n) => n !== 'default'), 'import')
  assert.equal(imported.default, required, 'the default export is the CommonJS module')
  // No member is reachable that is not declared, and none is declared that is missing.
  const runtime = runtimeSurface(required)
  assert.deepEqual(runtime.classes, declared.classes)
  // The constant objects (codes, perms) and the default export's keys.
  const { default: defaultKeys, ...objects } = declared.objects
  assert.deepEqual(runtime.objects, objects)
  assert.deepEqual(Object.keys(required).sort(), defaultKeys)
})

test('the npm package carries every file the package loads, and no file of lib/ is reachable from outside', () => {
  // What `require('zookeeper-lock')` loads, in a process of its own: index.js and the files of lib/.
  const loaded = JSON.parse(
    execFileSync(process.execPath, ['-e', `require(${JSON.stringify(PKG)}); console.log(JSON.stringify(Object.keys(require.cache)))`], {
      encoding: 'utf8',
    }),
  )
    .filter((file) => file.startsWith(PKG + path.sep) && !file.endsWith('.node'))
    .map((file) => path.relative(PKG, file))
  assert.ok(loaded.includes('index.js') && loaded.some((file) => file.startsWith('lib' + path.sep)), loaded.join(' '))
  // What `npm pack` puts in the package: package.json's `files`.
  const [{ files }] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: PKG, encoding: 'utf8' }))
  const packed = files.map((file) => file.path)
  assert.deepEqual(loaded.filter((file) => !packed.includes(file)), [], 'loaded, and missing from the package')
  assert.deepEqual(
    readdirSync(path.join(PKG, 'lib')).filter((file) => !packed.includes(`lib/${file}`)),
    [],
    'in lib/, and missing from the package',
  )
  // The package exports only its entry points: lib/'s files (and their internals) are its own.
  const required = createRequire(path.join(PKG, 'package.json'))
  const { name } = required('./package.json')
  assert.throws(() => required(`${name}/lib/lock.js`), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' })
})

test("lib/'s files require one another in one direction: no circle", () => {
  const dir = path.join(PKG, 'lib')
  const requires = new Map(
    readdirSync(dir).map((file) => [
      file,
      [...readFileSync(path.join(dir, file), 'utf8').matchAll(/require\('\.\/([^']+)'\)/g)].map((match) => match[1]),
    ]),
  )
  // Depth first: a file met again while its own requires are being followed closes a circle.
  const done = new Set()
  const visit = (file, trail) => {
    assert.ok(!trail.includes(file), `a circle: ${[...trail, file].join(' -> ')}`)
    if (done.has(file)) return
    assert.ok(requires.has(file), `${trail.at(-1)} requires ./${file}, which lib/ does not have`)
    for (const next of requires.get(file)) visit(next, [...trail, file])
    done.add(file)
  }
  for (const file of requires.keys()) visit(file, [])
  assert.ok(done.size >= 10, [...done].join(' '))
})

test('version is the package version, from the native addon', () => {
  const pkg = createRequire(path.join(PKG, 'package.json'))('./package.json')
  const required = createRequire(path.join(PKG, 'package.json'))('zookeeper-lock')
  assert.match(required.version, /^\d+\.\d+\.\d+/)
  assert.equal(required.version, pkg.version, 'Cargo.toml and package.json give one version (scripts/set-version)')
})

test("a native rejection's stack shows the caller's line", async () => {
  const closed = await Client.connect(ZK)
  await closed.close()
  const lock = closed.lock(uniquePath('closed'))
  for (const call of [() => lock.acquire(), () => lock.withLock(async () => {}), () => lock.contenders()]) {
    const rejected = await call().catch((error) => error)
    assert.equal(rejected.code, codes.CLOSED)
    assert.match(rejected.stack, /api\.test\.mjs/, rejected.stack)
  }
})

test('NOT_OWNER from the core names the owner by its label, not an internal id', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('label'))
    const hold = await lock.acquire()
    await hold.release() // the node goes; the flow of hold.run is its owner still
    const err = await hold.run(() => lock.release()).catch((error) => error)
    assert.equal(err.code, codes.NOT_OWNER, String(err))
    assert.match(err.message, /owner async-flow:\d+@thread:0 does not hold/, err.message)
  } finally {
    await client.close()
  }
})

test('twenty acquisitions sharing one AbortSignal draw no warning, and all abort', async () => {
  const client = await Client.connect(ZK)
  const other = await Client.connect(ZK)
  const warnings = []
  const onWarning = (warning) => warnings.push(warning)
  process.on('warning', onWarning)
  try {
    const path = uniquePath('shared-signal')
    const held = await other.lock(path).acquire()
    const controller = new AbortController()
    const lock = client.lock(path)
    const waiting = Array.from({ length: 20 }, () => lock.acquire({ signal: controller.signal }))
    await nodesBecome(path, 21)
    controller.abort()
    const outcomes = await Promise.allSettled(waiting)
    assert.ok(outcomes.every((o) => o.status === 'rejected' && o.reason.name === 'AbortError'))
    await nodesBecome(path, 1)
    await held.release()
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(warnings.map(String), [])
  } finally {
    process.off('warning', onWarning)
    await client.close()
    await other.close()
  }
})

test('owner labels name the worker thread', async () => {
  const path = uniquePath('worker')
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads')
     const { Client } = require(workerData.pkg)
     ;(async () => {
       const client = await Client.connect(workerData.zk)
       const lock = client.lock(workerData.path)
       const hold = await lock.acquire()
       const holder = await lock.holder()
       await hold.release()
       await client.close()
       parentPort.postMessage(holder.identity.owner)
     })()`,
    { eval: true, workerData: { pkg: PKG, zk: ZK, path } },
  )
  const workerThreadId = worker.threadId // read now: it becomes -1 once the worker has exited
  const [label] = await new Promise((resolve, reject) => {
    worker.once('message', (message) => resolve([message]))
    worker.once('error', reject)
  })
  assert.match(label, new RegExp(`^async-flow:\\d+@thread:${workerThreadId}$`))
  await worker.terminate()
  assert.deepEqual(await ephemeralsUnder(path), [])
})

test('inside a lost hold, a nested withLock and a nested release reject with ZKLOCK_LOCK_LOST', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('lost-nested'))
    const outcome = await lock.withLock(async () => {
      const inner = await lock.acquire()
      await client.close() // the hold is lost
      assert.equal(lock.isHeld, false)
      assert.equal(lock.state, 'lost')
      const nested = await lock.withLock(async () => 'ran').catch((error) => error)
      const released = await inner.release().catch((error) => error)
      return { nested, released }
    }).catch((error) => ({ outer: error }))
    // The outer withLock's own release reports the loss, so withLock rejects with it...
    assert.equal(outcome.outer?.code, codes.LOCK_LOST, String(outcome.outer))
    // ...after the nested calls inside did too (checked through what fn returned, kept below).
  } finally {
    await client.close()
  }
})

test('inside a lost hold, the nested calls reject with ZKLOCK_LOCK_LOST', async () => {
  const client = await Client.connect(ZK)
  try {
    const lock = client.lock(uniquePath('lost-nested-calls'))
    let seen
    await lock.withLock(async () => {
      const inner = await lock.acquire()
      await client.close()
      const nested = await lock.withLock(async () => 'ran').catch((error) => error)
      const released = await inner.release().catch((error) => error)
      seen = { nested: nested.code, released: released.code }
    }).catch(() => {})
    assert.deepEqual(seen, { nested: codes.LOCK_LOST, released: codes.LOCK_LOST })
  } finally {
    await client.close()
  }
})

test('every zklock error is a ZkLockError, made here or by the core; LOCK_LOST says why', async () => {
  const client = await Client.connect(ZK)
  const path = uniquePath('error-class')
  // Made by the JavaScript layer (bad arguments) and by the core (a bad path).
  for (const call of [() => client.lock(5), () => client.lock('relative')]) {
    assert.throws(call, (err) => err instanceof ZkLockError && err instanceof Error && err.code === codes.INVALID_ARGUMENT)
  }
  const lock = client.lock(path)
  const notOwner = await lock.release().catch((err) => err)
  assert.ok(notOwner instanceof ZkLockError && notOwner.code === codes.NOT_OWNER, String(notOwner))
  assert.equal(notOwner.name, 'ZkLockError')
  assert.match(notOwner.stack, /^ZkLockError: /)
  const hold = await lock.acquire()
  await client.close() // the hold is lost: closed
  const lost = await hold.release().catch((err) => err)
  assert.ok(lost instanceof ZkLockError, String(lost))
  assert.equal(lost.code, codes.LOCK_LOST)
  assert.equal(lost.lostReason, 'closed')
  const closed = await lock.acquire().catch((err) => err)
  assert.ok(closed instanceof ZkLockError && closed.code === codes.CLOSED, String(closed))
  // The core's message, as it is: the code is a property, not part of the text.
  assert.equal(closed.message, `client closed on ${lock.path}: the client was closed`)
  assert.match(lost.message, /lost/)
  assert.doesNotMatch(lost.message, /ZKLOCK_/)
  assert.ok(!(new AbortError() instanceof ZkLockError), "an abort is Node's AbortError")
})
