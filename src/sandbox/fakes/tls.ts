/**
 * A throwaway self-signed TLS certificate for the loopback HTTPS fakes (the Log Analytics Logs Query API and the Entra
 * token endpoint, which must be HTTPS: `@azure/core-rest-pipeline` refuses bearer tokens over plain HTTP), made at
 * start with `node:crypto` — so the sandbox needs no `openssl` binary (the container image has none) and ships no
 * private key. Node can parse certificates (`X509Certificate`) but not make them, and no dependency of tokenwatch
 * does; a library for it (`selfsigned` pulls `node-forge`) would add production weight for the sandbox alone, so the
 * certificate is written here in DER (ITU-T X.690), in the shape of RFC 5280 §4.1: version 3, a random serial, an
 * ECDSA P-256 key signed with SHA-256 (RFC 5758 §3.2), subject and issuer `CN=127.0.0.1`, `subjectAltName`
 * `IP:127.0.0.1` and `basicConstraints` `cA` (it is its own trust anchor: callers pass it as the CA).
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

/** A DER element: tag, length, content. */
function der(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...items: Buffer[]) => der(0x30, Buffer.concat(items));

/** An OBJECT IDENTIFIER from its dotted form. */
function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * a + b];
  for (const v of rest) {
    const enc = [v & 0x7f];
    for (let x = v >> 7; x > 0; x >>= 7) enc.unshift((x & 0x7f) | 0x80);
    bytes.push(...enc);
  }
  return der(0x06, Buffer.from(bytes));
}

/** UTCTime `YYMMDDHHMMSSZ` (years 1950–2049, RFC 5280 §4.1.2.5.1). */
function utcTime(ms: number): Buffer {
  const iso = new Date(ms).toISOString();
  return der(0x17, Buffer.from(`${iso.slice(2, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`, 'ascii'));
}

/** A PEM certificate and its PKCS #8 PEM key, for 127.0.0.1. */
export interface LoopbackCert {
  cert: string;
  key: string;
}

/**
 * A new self-signed certificate for 127.0.0.1 (see the module doc), valid from a day before `now` for `days` days.
 * `now`: wall-clock epoch ms (TLS checks the validity against the real clock, not a sandbox clock).
 */
export function loopbackCert(o: { now?: number; days?: number } = {}): LoopbackCert {
  const now = o.now ?? Date.now();
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecdsaSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(der(0x31, seq(oid('2.5.4.3'), der(0x0c, Buffer.from('127.0.0.1')))));
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40; // a positive INTEGER in 16 bytes: a leading 0x00 would make its DER encoding non-minimal (X.690 §8.3.2)
  const extensions = der(
    0xa3,
    seq(
      seq(oid('2.5.29.17'), der(0x04, seq(der(0x87, Buffer.from([127, 0, 0, 1]))))), // subjectAltName IP:127.0.0.1
      seq(oid('2.5.29.19'), der(0x01, Buffer.from([0xff])), der(0x04, seq(der(0x01, Buffer.from([0xff]))))), // basicConstraints critical, cA
    ),
  );
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))), // version 3
    der(0x02, serial),
    ecdsaSha256,
    name,
    seq(utcTime(now - 86_400_000), utcTime(now + (o.days ?? 365) * 86_400_000)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const signature = sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value
  const cert = seq(tbs, ecdsaSha256, der(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const pem = (label: string, body: Buffer) => `-----BEGIN ${label}-----\n${body.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END ${label}-----\n`;
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}
