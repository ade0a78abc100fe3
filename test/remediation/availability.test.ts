/** Why an approved action cannot run on a cluster (src/remediation/availability.ts), as the approval flow says it. */
import { describe, expect, it } from 'vitest';
import { remediationProblem } from '../../src/remediation/availability.js';

describe('remediationProblem', () => {
  it('names an unknown cluster, the reason access could not be set up, and access configured as none', () => {
    expect(remediationProblem(undefined)).toBe('unknown cluster');
    expect(remediationProblem({ config: { kubernetes: { kubeconfig: '/k' } }, kubeError: 'kubeconfig /k: no current context' })).toBe('kubeconfig /k: no current context');
    expect(remediationProblem({ config: { kubernetes: { none: true } } })).toBe('Kubernetes access is not configured for this cluster (kubernetes: none)');
    expect(remediationProblem({ config: { kubernetes: { kubeconfig: '/k' } } })).toBe('no Kubernetes access');
  });
});
