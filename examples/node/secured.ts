// Security, TLS and SASL in Node (TypeScript): type-checked by the suite (tsc --strict), not run
// (a secured ensemble's hosts and files). bindings-node/test/tls.test.mjs, sasl.test.mjs and
// kerberos.test.mjs run the same options against real servers.
import { readFileSync } from 'node:fs'
import { Client } from 'zookeeper-lock'

export async function tls (): Promise<Client> {
  // ANCHOR: tls
  const client = await Client.connect('zk1.example.com:2281,zk2.example.com:2281', {
    tls: {
      ca: readFileSync('/etc/zk/ca.pem'),
      cert: readFileSync('/etc/zk/client.pem'), // mutual TLS
      key: readFileSync('/etc/zk/client.key'),
      passphrase: process.env.ZK_KEY_PASSWORD // if it is encrypted
    }
  })
  // ANCHOR_END: tls
  return client
}

export async function sasl (hosts: string, password: string): Promise<Client> {
  // ANCHOR: sasl
  const client = await Client.connect(hosts, { sasl: { mechanism: 'DIGEST-MD5', username: 'alice', password } })
  // or { mechanism: 'GSSAPI', principal: 'alice@EXAMPLE.COM', keytab, credentialCache, serviceName, host }
  // ANCHOR_END: sasl
  return client
}
