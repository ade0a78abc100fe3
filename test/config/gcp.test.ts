/**
 * The `audit.gcp` source (GKE audit logs from Cloud Logging) and `poll.gcpLogging` in the config: defaults, the
 * effective config `tokenwatch config check` prints, and every wrong field named.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { register } from '../../src/cli/commands/config.js';
import { ConfigError, parseConfig } from '../../src/config/schema.js';

function issuesOf(raw: unknown): string[] {
  try {
    parseConfig(raw, {});
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => `${i.path.join('.')} → ${i.message}`);
    throw err;
  }
  return [];
}

describe('audit.gcp', () => {
  it('fills defaults: the GKE cluster name is the cluster name, 10m overlap, 1m lag, 1,000 a page, 60 reads a minute', () => {
    const c = parseConfig({ clusters: [{ name: 'prod-gke', audit: { gcp: { project: 'acme-prod-123' } } }] }, {});
    expect(c.clusters[0]!.audit).toEqual({ gcp: { project: 'acme-prod-123', clusterName: 'prod-gke', overlap: 600_000, lag: 60_000, pageSize: 1000 } });
    expect(c.poll.gcpLogging).toEqual({ readsPerMinute: 60, reuse: 300_000 });
  });

  it('names every wrong field, a second audit form, and a GKE cluster read twice', () => {
    expect(
      issuesOf({
        poll: { gcpLogging: { readsPerMinute: 0 } },
        clusters: [
          { name: 'a', audit: { gcp: { project: 'Bad_Project', pageSize: 5000, endpoint: 'ftp://x', lag: 'soon' } } },
          { name: 'b', audit: { gcp: { project: 'acme-prod-123', clusterName: 'shared' }, file: { path: '/x' } } },
          { name: 'c', audit: { gcp: { project: 'acme-prod-123', clusterName: 'shared' } } },
        ],
      }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^poll\.gcpLogging\.readsPerMinute → /),
        expect.stringMatching(/^clusters\.0\.audit\.gcp\.project → expected a Google Cloud project id/),
        expect.stringMatching(/^clusters\.0\.audit\.gcp\.pageSize → /),
        expect.stringMatching(/^clusters\.0\.audit\.gcp\.endpoint → expected an http/),
        expect.stringMatching(/^clusters\.0\.audit\.gcp\.lag → /),
        'clusters.1.audit → expected exactly one of cloudwatch, file, webhook, gcp, none, azure (got file, gcp)',
        'clusters.2.audit.gcp → GKE cluster "shared" of project acme-prod-123 is already read by clusters[1]',
      ]),
    );
  });

  it('`tokenwatch config check` prints the effective gcp source with durations', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-gcp-config-'));
    const path = join(dir, 'config.yaml');
    writeFileSync(path, 'clusters:\n  - name: prod-gke\n    audit:\n      gcp:\n        project: acme-prod-123\n        location: us-central1\n        overlap: 15m\n');
    let stdout = '';
    const program = new Command('tokenwatch').exitOverride().configureOutput({ writeOut: (s) => void (stdout += s), writeErr: () => undefined });
    register(program, { env: {} });
    let code = 0;
    try {
      await program.parseAsync(['node', 'tokenwatch', 'config', 'check', '--config', path]);
    } catch (err) {
      if (!(err instanceof CommanderError)) throw err;
      code = err.exitCode;
    }
    expect(code).toBe(0);
    const printed = parseYaml(stdout) as { clusters: Array<{ audit: unknown }>; poll: { gcpLogging: unknown } };
    expect(printed.clusters[0]!.audit).toEqual({ gcp: { project: 'acme-prod-123', clusterName: 'prod-gke', location: 'us-central1', overlap: '15m', lag: '1m', pageSize: 1000 } });
    expect(printed.poll.gcpLogging).toEqual({ readsPerMinute: 60, reuse: '5m' });
  });
});
