import { describe, expect, it } from 'vitest';
import { startFakeKube } from '../../fakes/kubernetes.js';
import { blockActionPayload, sendBlockAction, sendSlashCommand, startFakeSlack } from '../../fakes/slack.js';
import { loadFakes, type SandboxFakes } from '../../src/sandbox/fakes.js';

// Compile-time check: the real fakes satisfy the API the sandbox types for them (src/sandbox/fakes.ts).
const real: SandboxFakes = { startFakeSlack, startFakeKube, sendSlashCommand, sendBlockAction, blockActionPayload };

describe('loading the fakes at run time', () => {
  it('loads fakes/slack.ts and fakes/kubernetes.ts by URL, and they work', async () => {
    const loaded = await loadFakes();
    for (const name of Object.keys(real) as Array<keyof SandboxFakes>) {
      expect(typeof loaded[name], name).toBe('function');
      expect(loaded[name].name).toBe(real[name].name);
    }
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
