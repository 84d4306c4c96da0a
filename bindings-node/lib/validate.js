'use strict'
// The checks of the arguments users pass, before anything reaches the addon: their types and
// shapes, with messages that name the argument. What the values mean (a path, an ACL, a TLS
// bundle, a packet limit) is the core's to check, in the same words in every language.

const { invalid } = require('./error.js')

/** Permission bits of custom ACL entries, as ZooKeeper numbers them. */
const perms = Object.freeze({ READ: 1, WRITE: 2, CREATE: 4, DELETE: 8, ADMIN: 16, ALL: 31 })
const ACL_PRESETS = ['open', 'creatorAllWorldRead', 'creatorAll']

const MAX_TIMEOUT_MS = 2 ** 31 - 1 // as setTimeout's: about 24.8 days
const ACQUIRE_OPTIONS = Object.freeze(['timeoutMs', 'signal'])

function checkOptions(options, allowed, what) {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`${what}: options must be an object, got ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) {
      throw invalid(`${what}: unknown option '${key}' (known: ${allowed.join(', ')})`)
    }
  }
  return options
}

function checkMs(value, name, { min, fallback }) {
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMEOUT_MS) {
    throw invalid(`${name} must be an integer number of milliseconds from ${min} to ${MAX_TIMEOUT_MS}, got ${describe(value)}`)
  }
  return value
}

// How long an acquisition may wait: left out (undefined or null) or Infinity waits as long as it
// takes (undefined to the native side), 0 only tries, else that many milliseconds. Negative values
// are refused, -1 included (C's and Python's spelling of forever): a remaining time computed in
// milliseconds reaches -1 when it is 1 ms late, and must not turn into a wait for ever.
function checkWaitMs(value, name) {
  if (value === undefined || value === null || value === Infinity) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIMEOUT_MS) {
    throw invalid(
      `${name} must be an integer number of milliseconds from 0 (only try) to ${MAX_TIMEOUT_MS}, or Infinity (or left out) to wait as long as it takes, got ${describe(value)}`,
    )
  }
  return value
}

// The servers' packet limit (jute.maxbuffer): a whole number of bytes that 32 bits hold. The core
// refuses one too small for a lock request, with its own message, the same in every language.
function checkBytes(value, name) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 2 ** 32 - 1) {
    throw invalid(`${name} must be a whole number of bytes below 2**32, got ${describe(value)}`)
  }
  return value
}

// A count of leases (n, or a max): the core refuses 0 with its own message, the same in every
// language; this only checks that it is a whole number a u32 holds.
function checkCount(value, name, { fallback }) {
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 2 ** 32 - 1) {
    throw invalid(`${name} must be an integer from 1 to ${2 ** 32 - 1}, got ${describe(value)}`)
  }
  return value
}

function checkString(value, name, { optional = false } = {}) {
  if (optional && (value === undefined || value === null)) return undefined
  if (typeof value !== 'string' || value.length === 0) {
    throw invalid(`${name} must be a non-empty string, got ${describe(value)}`)
  }
  return value
}

// The `sasl` option as the addon takes it: { mechanism, username, password } (DIGEST-MD5) or
// { mechanism, principal, keytab, credentialCache, serviceName, host } (GSSAPI). The core checks
// what the values mean; no message here shows the password.
const SASL_KEYS = {
  'DIGEST-MD5': ['mechanism', 'username', 'password'],
  GSSAPI: ['mechanism', 'principal', 'keytab', 'credentialCache', 'serviceName', 'host']
}
function checkSasl(sasl) {
  if (sasl === undefined || sasl === null) return undefined
  if (typeof sasl !== 'object' || Array.isArray(sasl)) {
    throw invalid(`sasl must be an object such as { mechanism: 'DIGEST-MD5', username, password }, got ${describe(sasl)}`)
  }
  const mechanism = typeof sasl.mechanism === 'string' ? sasl.mechanism.toUpperCase() : sasl.mechanism
  const keys = SASL_KEYS[mechanism]
  if (keys === undefined) {
    throw invalid(`sasl.mechanism must be 'DIGEST-MD5' or 'GSSAPI', got ${describe(sasl.mechanism)}`)
  }
  checkOptions(sasl, keys, `sasl (${mechanism})`)
  const config = { mechanism }
  for (const key of keys.slice(1)) {
    const value = sasl[key]
    if (value === undefined || value === null) continue
    if (typeof value !== 'string') throw invalid(`sasl.${key} must be a string`)
    config[key] = value
  }
  const needed = mechanism === 'GSSAPI' ? ['principal'] : ['username', 'password']
  for (const key of needed) {
    if (config[key] === undefined) throw invalid(`sasl (${mechanism}) needs ${needed.join(' and ')}`)
  }
  return config
}

// A lock's `acl` option as the addon takes it: [preset name, custom entries]. The core checks
// what an ACL means (credentials for a creator preset, ids of each scheme) and says what is wrong.
function checkAcl(acl) {
  if (acl === undefined || acl === null) return [undefined, undefined]
  if (typeof acl === 'string') {
    if (!ACL_PRESETS.includes(acl)) {
      throw invalid(`acl must be one of ${ACL_PRESETS.map((p) => `'${p}'`).join(', ')} or an array of entries, got ${describe(acl)}`)
    }
    return [acl, undefined]
  }
  if (!Array.isArray(acl)) {
    throw invalid(`acl must be a preset's name or an array of { perms, scheme, id } entries, got ${describe(acl)}`)
  }
  const entries = acl.map((entry, i) => {
    if (entry === null || typeof entry !== 'object') throw invalid(`acl[${i}] must be { perms, scheme, id }, got ${describe(entry)}`)
    const { perms: bits, scheme, id } = entry
    if (typeof bits !== 'number' || !Number.isInteger(bits) || bits < 0 || bits > perms.ALL) {
      throw invalid(`acl[${i}].perms must be a combination of zklock.perms (0 to ${perms.ALL}), got ${describe(bits)}`)
    }
    if (typeof scheme !== 'string' || typeof id !== 'string') {
      throw invalid(`acl[${i}].scheme and .id must be strings, got ${describe(scheme)} and ${describe(id)}`)
    }
    return { perms: bits, scheme, id }
  })
  return [undefined, entries]
}

// The `tls` option, as Node's tls.connect names its fields: PEM contents as strings or Buffers
// (arrays of them for `ca` and `cert`). The core checks what they hold.
const TLS_OPTIONS = ['ca', 'cert', 'key', 'passphrase', 'rejectUnauthorized', 'servername']
function checkTls(tls) {
  if (tls === undefined || tls === null) return undefined
  const opts = checkOptions(tls, TLS_OPTIONS, 'Client.connect: tls')
  const pem = (value, name, { many }) => {
    if (value === undefined || value === null) return undefined
    if (many && Array.isArray(value)) return value.map((item, i) => pem(item, `${name}[${i}]`, { many: false })).join('\n')
    if (typeof value === 'string') return value
    if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
    throw invalid(`tls.${name} must be PEM as a string or a Buffer${many ? ' (or an array of them)' : ''}, got ${describe(value)}`)
  }
  const rejectUnauthorized = opts.rejectUnauthorized ?? true
  if (typeof rejectUnauthorized !== 'boolean') {
    throw invalid(`tls.rejectUnauthorized must be a boolean, got ${describe(rejectUnauthorized)}`)
  }
  return {
    // Left out, none: the core refuses to verify against nothing (rejectUnauthorized: true), in
    // its own words, the same in every language. Node's built-in CAs are never used.
    ca: pem(opts.ca, 'ca', { many: true }),
    cert: pem(opts.cert, 'cert', { many: true }),
    key: pem(opts.key, 'key', { many: false }),
    passphrase: checkString(opts.passphrase, 'tls.passphrase', { optional: true }),
    rejectUnauthorized,
    servername: checkString(opts.servername, 'tls.servername', { optional: true }),
  }
}

function checkSignal(signal) {
  if (signal === undefined || signal === null) return undefined
  if (!(signal instanceof AbortSignal)) throw invalid(`signal must be an AbortSignal, got ${describe(signal)}`)
  return signal
}

// The native lock's arguments for `client.lock` and `client.readWriteLock` (named by `what`).
function lockArguments(path, options, what) {
  checkString(path, 'path')
  const opts = checkOptions(options, ['identifier', 'acl'], what)
  const identifier = checkString(opts.identifier, 'identifier', { optional: true })
  const [acl, aclEntries] = checkAcl(opts.acl)
  return [path, identifier, acl, aclEntries]
}

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return `${typeof value} ${value}`
  if (typeof value === 'function') return 'a function'
  return typeof value === 'object' ? `an object (${value.constructor?.name ?? 'null prototype'})` : typeof value
}

module.exports = {
  perms,
  MAX_TIMEOUT_MS,
  ACQUIRE_OPTIONS,
  checkOptions,
  checkMs,
  checkWaitMs,
  checkBytes,
  checkCount,
  checkString,
  checkSasl,
  checkAcl,
  checkTls,
  checkSignal,
  lockArguments,
  describe,
}
