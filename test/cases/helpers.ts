/** Runs `scan` (in process, as `tokenwatch scan --cluster prod --format json` does) on a case under test/fixtures/cases/. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runScan } from '../../src/scan/run.js';
import type { Finding } from '../../src/findings/types.js';

const CASES = fileURLToPath(new URL('../fixtures/cases/', import.meta.url));

/** The findings of case `slug` (its `audit.jsonl` and, unless `noSnapshot`, its `cluster.json`). */
export async function scanCase(slug: string, o: { noSnapshot?: boolean } = {}): Promise<Finding[]> {
  const dir = join(CASES, slug);
  const { report } = await runScan({
    files: [join(dir, 'audit.jsonl')],
    cluster: 'prod',
    maxTokenAge: { mode: 'eks' },
    ...(o.noSnapshot ? {} : { snapshot: join(dir, 'cluster.json') }),
  });
  return report.findings;
}

/** The one finding for namespace/serviceAccount (and kind), or throws listing what was found. */
export function findingOf(findings: Finding[], namespace: string, serviceAccount: string, kind?: Finding['kind']): Finding {
  const f = findings.find((x) => x.namespace === namespace && x.serviceAccount === serviceAccount && (kind === undefined || x.kind === kind));
  if (!f) throw new Error(`no finding ${namespace}/${serviceAccount}; found ${findings.map((x) => `${x.kind} ${x.namespace}/${x.serviceAccount}`).join(', ')}`);
  return f;
}
