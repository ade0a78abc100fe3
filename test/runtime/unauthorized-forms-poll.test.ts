/**
 * `serve`'s poller (ClusterPoller, the real store) over the CloudWatch source against the loopback fake, in
 * FilterLogEvents and Logs Insights mode: every form of a user-less 401 (docs/rejected-requests.md) ends in the
 * ServiceAccount's 401 finding, each request counted once although it is logged at two stages.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { openStore, type Store } from '../../src/store/index.js';
import { auditEvent, UNAUTHORIZED_STATUS, type EventSpec, type UnauthorizedForm } from '../sources/events.js';

const T = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;
const GROUP = '/aws/eks/prod/cluster';
const IP = '10.9.0.7';
const quiet = createLogger({ level: 'silent' });

let store: Store;
let cw: FakeCloudWatch;
beforeEach(async () => {
  store = await openStore(join(mkdtempSync(join(tmpdir(), 'tw-401-poll-')), 'tw.db'));
  cw = await startFakeCloudWatch({ now: () => T, queryRunningPolls: 1 });
});
afterEach(async () => {
  await cw.close();
  await store.close();
});

function seed(form: UnauthorizedForm): void {
  const specs: EventSpec[] = [{ auditID: 's1', time: T - 50 * MIN, kind: 'stale', pod: 'fluent-bit-x1', secondsAfterWarning: 89 * 86_400, sourceIP: IP, userAgent: 'Fluent-Bit' }];
  for (let i = 0; i < 3; i++) {
    for (const stage of ['ResponseStarted', 'ResponseComplete']) {
      specs.push({ auditID: `u${i}`, time: T - (40 - i) * MIN, kind: 'unauthorized', form, stage, sourceIP: IP, userAgent: 'Fluent-Bit' });
    }
  }
  cw.putEvents(GROUP, 'kube-apiserver-audit-0a1b', specs.map((s) => ({ timestamp: s.time, message: auditEvent(s) })));
}

describe('serve polls read every 401 form from CloudWatch', () => {
  for (const mode of ['filter', 'insights'] as const) {
    for (const form of Object.keys(UNAUTHORIZED_STATUS) as UnauthorizedForm[]) {
      it(`${mode}: ${form}`, async () => {
        seed(form);
        const cluster = parseConfig({ clusters: [{ name: 'prod', audit: { cloudwatch: { region: 'us-east-1', logGroup: GROUP, mode } } }] }, {}).clusters[0]!;
        const source = new CloudWatchSource({ region: 'us-east-1', logGroup: GROUP, streamPrefix: 'kube-apiserver-audit-', endpoint: cw.url, credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, mode, overlapMs: 10 * MIN, insights: { pollIntervalMs: 1 }, sdkRetryDelayMs: 1, retry: { baseDelayMs: 1, maxDelayMs: 5, budgetMs: 200 } });
        try {
          const out = await new ClusterPoller({ cluster, source, store, logger: quiet, clock: () => T }).pollOnce();
          expect(out.error).toBeUndefined();
          if (mode === 'filter') {
            expect(cw.requestsOf('FilterLogEvents')[0]?.body['filterPattern']).toBe('?"authentication.k8s.io/stale-token" ?"authentication.k8s.io/legacy-token" ?"Authentication failed" ?"Unauthorized"');
          } else {
            expect(cw.requestsOf('StartQuery')[0]?.body['queryString']).toContain('or @message like "Unauthorized"');
          }
          const f = out.findings.find((x) => x.kind === 'unauthorized');
          expect(f).toMatchObject({ namespace: 'kube-system', serviceAccount: 'multus', requests: 3 });
        } finally {
          source.close();
        }
      });
    }
  }
});
