import { describe, expect, it } from 'vitest';
import { loadFakes } from '../../../src/sandbox/fakes/index.js';

describe('the sandbox fakes', () => {
  it('are the shared loopback fakes, and they work', async () => {
    const loaded = await loadFakes();
    const slack = await loaded.startFakeSlack();
    const kube = await loaded.startFakeKube({ objects: [{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'multus', namespace: 'kube-system' } }] });
    try {
      expect(kube.store.get('ServiceAccount', 'kube-system', 'multus')?.kind).toBe('ServiceAccount');
      expect(slack.apiUrl).toBe(`${slack.url}/api/`);
    } finally {
      await Promise.all([slack.close(), kube.close()]);
    }
  });
});
