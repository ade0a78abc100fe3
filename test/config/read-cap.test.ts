import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_CONFIG_FILE_BYTES, loadConfig, readFileCapped } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/schema.js';
import { ROOT } from '../cli/run-cli.js';
import { cliMain } from '../support/build.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-config-cap-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('config file read cap (1 MiB + 1 byte, whatever the file is)', () => {
  it('reads at most maxBytes + 1 bytes of an endless file (/dev/zero)', () => {
    const { bytes, tooLarge } = readFileCapped('/dev/zero', 4096);
    expect(tooLarge).toBe(true);
    expect(bytes.length).toBe(4096);
  });

  it('refuses --config /dev/zero with a ConfigError saying the limit', () => {
    expect(MAX_CONFIG_FILE_BYTES).toBe(1024 * 1024);
    let err: unknown;
    try {
      loadConfig('/dev/zero', {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('larger than 1048576 bytes');
  });

  it('accepts exactly 1 MiB and refuses 1 MiB + 1 byte', () => {
    const exact = join(dir, 'exact.yaml');
    writeFileSync(exact, `#${'x'.repeat(MAX_CONFIG_FILE_BYTES - 2)}\n`);
    expect(readFileCapped(exact, MAX_CONFIG_FILE_BYTES)).toMatchObject({ tooLarge: false });
    const over = join(dir, 'over.yaml');
    writeFileSync(over, `#${'x'.repeat(MAX_CONFIG_FILE_BYTES - 1)}\n`);
    expect(() => loadConfig(over, {})).toThrow(/larger than 1048576 bytes/);
  });

  it('keeps reading a config from process substitution (a pipe, no size)', () => {
    const r = spawnSync('bash', ['-c', `'${process.execPath}' '${cliMain()}' config check --config <(cat examples/serve.yaml)`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('tokenwatch effective configuration');
  });
});
