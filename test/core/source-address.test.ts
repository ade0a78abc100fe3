/**
 * Which sourceIPs entry a request is attributed to: the rightmost one not a trusted proxy (kubernetes
 * `apimachinery/pkg/util/net/http.go` SourceIPs puts client-set X-Forwarded-For / X-Real-Ip entries first and the
 * connection's address last), through the core function and a whole `scan`.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clientAddress, isAddressOrCidr, parseTrustedProxies } from '../../src/core/source-address.js';
import { runScan } from '../../src/scan/run.js';

describe('clientAddress', () => {
  it('takes the connection’s own address (the last entry) without trusted proxies; the rest is client-set', () => {
    expect(clientAddress(['10.1.1.5', '10.9.9.9'])).toEqual({ address: '10.9.9.9', forwarded: ['10.1.1.5'] });
    expect(clientAddress(['10.9.9.9'])).toEqual({ address: '10.9.9.9', forwarded: [] });
    expect(clientAddress([])).toEqual({ forwarded: [] });
  });

  it('skips trusted proxies from the right (addresses and CIDR blocks, IPv4 and IPv6, IPv4-mapped IPv6)', () => {
    const trusted = parseTrustedProxies(['10.0.0.0/24', 'fd00::1', '192.0.2.9']);
    expect(clientAddress(['6.6.6.6', '10.2.0.7', '10.0.0.4'], trusted)).toEqual({ address: '10.2.0.7', forwarded: ['6.6.6.6'] });
    expect(clientAddress(['10.2.0.7', 'fd00::1'], trusted).address).toBe('10.2.0.7');
    expect(clientAddress(['10.2.0.7', '::ffff:192.0.2.9'], trusted).address).toBe('10.2.0.7');
    // Every entry trusted: the leftmost (the proxy's own request).
    expect(clientAddress(['10.0.0.5', '10.0.0.4'], trusted)).toEqual({ address: '10.0.0.5', forwarded: [] });
    // A proxy not listed is the client, whatever it forwards.
    expect(clientAddress(['10.2.0.7', '10.0.1.4'], trusted).address).toBe('10.0.1.4');
  });

  it('accepts only addresses and CIDR blocks', () => {
    for (const ok of ['10.0.0.1', '10.0.0.0/8', 'fd00::/8', '::1', '0.0.0.0/0']) expect(isAddressOrCidr(ok)).toBe(true);
    for (const bad of ['10.0.0.0/33', '127.1', 'proxy.local', '10.0.0.1/', '', 'fd00::/129']) expect(isAddressOrCidr(bad)).toBe(false);
    expect(() => parseTrustedProxies(['10.0.0.0/8', 'nope'])).toThrow('trusted proxy "nope" is neither an IP address nor a CIDR block');
  });
});

function event(o: { id: string; time: string; sourceIPs: string[]; stale?: boolean }): string {
  const base = {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: o.id,
    stage: 'ResponseComplete',
    requestURI: '/api/v1/namespaces/payments/configmaps',
    verb: 'list',
    sourceIPs: o.sourceIPs,
    userAgent: 'billing-api/1.4',
    requestReceivedTimestamp: o.time,
    stageTimestamp: o.time,
  };
  if (o.stale) {
    return JSON.stringify({
      ...base,
      user: { username: 'system:serviceaccount:payments:billing-api', extra: { 'authentication.kubernetes.io/pod-name': ['billing-api-0'] } },
      responseStatus: { metadata: {}, code: 200 },
      annotations: { 'authentication.k8s.io/stale-token': 'subject: system:serviceaccount:payments:billing-api, seconds after warning threshold: 7000000' },
    });
  }
  return JSON.stringify({ ...base, user: {}, responseStatus: { metadata: {}, status: 'Failure', message: 'Authentication failed, attempted: bearer', reason: 'Unauthorized', code: 401 } });
}

describe('scan with forged X-Forwarded-For', () => {
  // billing-api's pod at 10.1.1.5 uses a stale token through the morning; 12 token-less requests from 10.9.9.9 claim
  // `X-Forwarded-For: 10.1.1.5`.
  const lines = [
    ...Array.from({ length: 6 }, (_, i) => event({ id: `s${i}`, time: `2026-11-29T10:${String(i * 10).padStart(2, '0')}:00Z`, sourceIPs: ['10.1.1.5'], stale: true })),
    ...Array.from({ length: 12 }, (_, i) => event({ id: `u${i}`, time: `2026-11-29T10:20:${String(i).padStart(2, '0')}Z`, sourceIPs: ['10.1.1.5', '10.9.9.9'] })),
  ];
  const dir = mkdtempSync(join(tmpdir(), 'tw-xff-'));
  const file = join(dir, 'audit.log');
  writeFileSync(file, `${lines.join('\n')}\n`);

  it('never ties the 401s to the pod the forged entry names; Details get the forged entry', async () => {
    const { report } = await runScan({ files: [file], cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    const u = report.findings.find((f) => f.kind === 'unauthorized')!;
    expect(u.serviceAccount).toBe('(unattributed)');
    expect(u.sourceIPs).toEqual(['10.9.9.9']);
    expect(u.forwardedIPs).toEqual(['10.1.1.5']);
    expect(report.findings.find((f) => f.serviceAccount === 'billing-api')?.severity).not.toBe('critical');
  });

  it('behind a trusted proxy, the address the proxy appended counts', async () => {
    const proxied = join(dir, 'proxied.log');
    writeFileSync(proxied, `${lines.map((l) => l.replace('["10.1.1.5","10.9.9.9"]', '["6.6.6.6","10.1.1.5","10.0.0.4"]').replace('"sourceIPs":["10.1.1.5"]', '"sourceIPs":["10.1.1.5","10.0.0.4"]')).join('\n')}\n`);
    const { report } = await runScan({ files: [proxied], cluster: 'prod', maxTokenAge: { mode: 'eks' }, trustedProxies: parseTrustedProxies(['10.0.0.0/24']) });
    const u = report.findings.find((f) => f.kind === 'unauthorized')!;
    expect(u.serviceAccount).toBe('billing-api');
    expect(u.sourceIPs).toEqual(['10.1.1.5']);
    expect(u.forwardedIPs).toEqual(['6.6.6.6']);
    // Tied by address: its stale uses went on after the 401s began, so they are not corroborated.
    expect(u.attribution?.basis).toBe('address-only');
    expect(u.severity).toBe('warning');
    // Without the setting, the proxy's own address is the client: nothing is attributed.
    const plain = await runScan({ files: [proxied], cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    expect(plain.report.findings.find((f) => f.kind === 'unauthorized')!.sourceIPs).toEqual(['10.0.0.4']);
  });
});
