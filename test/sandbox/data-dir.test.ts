/**
 * `tokenwatch sandbox --data-dir DIR` writes only into a folder it created (or was given empty), marked by
 * `.tokenwatch-sandbox`: an operator's folder holding a real `tokenwatch.yaml`, kubeconfig and audit logs is
 * refused before anything in it is read, written or removed.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimDataDir, DATA_DIR_MARKER, startSandbox } from '../../src/sandbox/sandbox.js';

/** Every file under `dir` with its content, for "nothing changed" checks. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, prefix: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name), `${prefix}${e.name}/`);
      else out[`${prefix}${e.name}`] = readFileSync(join(d, e.name), 'utf8');
    }
  };
  walk(dir, '');
  return out;
}

function operatorFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tw-ops-'));
  writeFileSync(join(dir, 'tokenwatch.yaml'), 'clusters:\n  - name: prod-eks\n');
  writeFileSync(join(dir, 'kubeconfig'), 'apiVersion: v1\nkind: Config\n');
  mkdirSync(join(dir, 'audit'));
  writeFileSync(join(dir, 'audit', 'kube-apiserver-audit.log'), '{"kind":"Event"}\n');
  return dir;
}

describe('sandbox --data-dir safety', () => {
  it('refuses an operator folder (tokenwatch.yaml, kubeconfig, audit logs) with a clear message, and changes nothing', async () => {
    const dir = operatorFolder();
    const before = snapshot(dir);
    const message =
      `--data-dir ${dir} is not empty and was not created by the sandbox (it holds audit, kubeconfig, tokenwatch.yaml); ` +
      `the sandbox writes only into a folder it created (marked by ${DATA_DIR_MARKER}), so nothing in it was touched. ` +
      'Pass --data-dir with a new or empty folder (default ./data/sandbox)';
    await expect(startSandbox({ port: 0, dataDir: dir, slack: false })).rejects.toThrow(message);
    await expect(startSandbox({ port: 0, dataDir: dir, slack: false, reset: true })).rejects.toThrow(message);
    expect(snapshot(dir)).toEqual(before);
  });

  it('creates a missing folder with the marker, marks an empty one, and accepts a marked one', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'tw-sbdir-'));
    const fresh = join(parent, 'new', 'state');
    await claimDataDir(fresh);
    expect(readdirSync(fresh)).toEqual([DATA_DIR_MARKER]);
    await claimDataDir(fresh);
    writeFileSync(join(fresh, 'sandbox.log'), 'x');
    await expect(claimDataDir(fresh)).resolves.toBeUndefined();

    const empty = mkdtempSync(join(tmpdir(), 'tw-sbdir-empty-'));
    await claimDataDir(empty);
    expect(existsSync(join(empty, DATA_DIR_MARKER))).toBe(true);
  });

  it('adopts the state folder of an earlier sandbox (sandbox.json and only sandbox files), but not one with other files', async () => {
    const old = mkdtempSync(join(tmpdir(), 'tw-sbdir-old-'));
    writeFileSync(join(old, 'sandbox.json'), JSON.stringify({ version: 1, shiftSec: 10, simNow: 1, startedAt: 1 }));
    writeFileSync(join(old, 'tokenwatch.db'), '');
    mkdirSync(join(old, 'audit'));
    await claimDataDir(old);
    expect(existsSync(join(old, DATA_DIR_MARKER))).toBe(true);

    const mixed = operatorFolder();
    writeFileSync(join(mixed, 'sandbox.json'), JSON.stringify({ version: 1, shiftSec: 10, simNow: 1, startedAt: 1 }));
    writeFileSync(join(mixed, 'id_rsa'), 'secret');
    await expect(claimDataDir(mixed)).rejects.toThrow(/is not empty and was not created by the sandbox \(it holds audit, id_rsa, kubeconfig, sandbox\.json, tokenwatch\.yaml\)/);
    expect(existsSync(join(mixed, DATA_DIR_MARKER))).toBe(false);
  });

  it('refuses a file given as the folder', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tw-sbdir-file-')), 'plain');
    writeFileSync(file, 'x');
    await expect(claimDataDir(file)).rejects.toThrow(`--data-dir ${file} is a file, not a folder: pass a new or empty folder`);
    expect(readFileSync(file, 'utf8')).toBe('x');
  });
});
