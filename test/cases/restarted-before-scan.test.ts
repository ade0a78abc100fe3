/** Case restarted-before-scan (test/fixtures/cases/restarted-before-scan): tokens of replaced pods are not a token file, nor live. */
import { describe, expect, it } from 'vitest';
import { findingOf, scanCase } from './helpers.js';

describe('case restarted-before-scan', () => {
  it('client-caches-token (not static-token-file), no live token left, info', async () => {
    const findings = await scanCase('restarted-before-scan');
    const f = findingOf(findings, 'cachegrid', 'cachegrid', 'stale-token');
    expect(f.requests).toBe(9);
    expect(f.workloads).toEqual([{ kind: 'StatefulSet', namespace: 'cachegrid', name: 'cachegrid' }]);
    expect(f.cause.id).toBe('client-caches-token');
    expect(f.rejectionAt).toBeNull();
    expect(f.severity).toBe('info');
    expect(f.missingPods).toEqual(['cachegrid-0', 'cachegrid-1', 'cachegrid-2']);
    expect(f.cause.evidence.join('\n')).not.toContain('outside the pod');
    expect(f.cause.evidence).toContainEqual(
      expect.stringContaining('stale uses came from earlier pods cachegrid-0, cachegrid-1, cachegrid-2, each up to its replacement\'s start'),
    );
  });
});
