import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { CONFIG_INVALID_CODE, register } from '../../src/cli/commands/config.js';

const fixture = (name: string) => join(import.meta.dirname, '../fixtures/config', name);
const repo = (name: string) => join(import.meta.dirname, '../..', name);

const BOT = 'xoxb-1111111111-2222222222222-AbCdEfGhIjKlMnOpQrStUvWx';
const APP = 'xapp-1-A0123456789-3333333333333-0123456789abcdef0123456789abcdef';

/** Runs `tokenwatch <args>` on a fresh commander program; returns exit code and captured output. */
async function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const program = new Command('tokenwatch')
    .exitOverride()
    .configureOutput({ writeOut: (s) => void (stdout += s), writeErr: (s) => void (stderr += s) });
  register(program, { env });
  try {
    await program.parseAsync(['node', 'tokenwatch', ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    return { code: err.exitCode, stdout, stderr };
  }
}

describe('tokenwatch config check', () => {
  it('prints the effective config with secrets masked, exit 0', async () => {
    const r = await run(['config', 'check', '--config', repo('config.example.yaml')], { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).not.toContain(BOT);
    expect(r.stdout).not.toContain(APP);
    expect(r.stdout).not.toContain('AbCdEfGhIjKlMnOpQrSt');
    expect(r.stdout).toContain('#   SLACK_BOT_TOKEN: xoxb-****UvWx');
    const printed = parseYaml(r.stdout) as { clusters: { name: string; lookback: string }[]; slack: { approvals: { expiresAfter: string } } };
    expect(printed.clusters.map((c) => c.name)).toEqual(['prod-eks', 'staging']);
    expect(printed.clusters[1]!.lookback).toBe('1d');
    expect(printed.slack.approvals.expiresAfter).toBe('30m');
  });

  it('reads the path from TOKENWATCH_CONFIG', async () => {
    const r = await run(['config', 'check'], { TOKENWATCH_CONFIG: repo('examples/serve.yaml') });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('path: examples/audit/kube-apiserver-audit.log');
  });

  it('lists every problem on stderr and exits 2', async () => {
    const r = await run(['config', 'check', '--config', fixture('invalid-many.yaml')], {});
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.match(/✖/g)).toHaveLength(13);
    expect(r.stderr).toContain('→ at clusters[0].schedule');
    expect(r.stderr).toContain('→ at env.SLACK_BOT_TOKEN');
  });

  it('exits 2 with a hint when no config is given', async () => {
    const r = await run(['config', 'check'], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('required: pass --config FILE or set TOKENWATCH_CONFIG');
  });

  it('never prints a secret, even when the config is invalid', async () => {
    const r = await run(['config', 'check', '--config', repo('config.example.yaml')], {
      SLACK_BOT_TOKEN: 'xoxp-not-a-bot-token-TOPSECRET',
      SLACK_APP_TOKEN: APP,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('must be a bot token starting with "xoxb-"');
    expect(r.stderr + r.stdout).not.toContain('TOPSECRET');
    expect(r.stderr + r.stdout).not.toContain(APP);
  });

  describe('store.path that cannot hold a store', () => {
    const withStore = (path: string): string => {
      const dir = mkdtempSync(join(tmpdir(), 'tw-config-store-'));
      const file = join(dir, 'tokenwatch.yaml');
      writeFileSync(file, `store:\n  path: ${JSON.stringify(path)}\nclusters:\n  - name: prod\n    audit:\n      file:\n        path: ./audit.log\n`);
      return file;
    };

    it('refuses ":memory:" (a restart would forget everything), at the key and its line', async () => {
      const r = await run(['config', 'check', '--config', withStore(':memory:')], {});
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(
        '✖ an in-memory store forgets every finding, approval and cursor at restart; give a file path (e.g. ./data/tokenwatch.db) (line 2)\n  → at store.path',
      );
    });

    it('refuses an existing directory, naming a file inside it', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tw-config-storedir-'));
      const r = await run(['config', 'check', '--config', withStore(dir)], {});
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`✖ ${dir} is a directory; give the database file inside it (e.g. ${join(dir, 'tokenwatch.db')}) (line 2)\n  → at store.path`);
    });

    it('refuses a path ending with a slash, even before the directory exists', async () => {
      const r = await run(['config', 'check', '--config', withStore('./not-yet/')], {});
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('✖ names a directory (ends with a slash); give the database file inside it (e.g. ./data/tokenwatch.db) (line 2)\n  → at store.path');
    });

    it('accepts a file path whose directory does not exist yet (serve creates it)', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tw-config-storenew-'));
      const r = await run(['config', 'check', '--config', withStore(join(dir, 'later', 'tw.db'))], {});
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    });
  });

  it('uses the CommanderError code for invalid configs', async () => {
    const program = new Command('tokenwatch').exitOverride().configureOutput({ writeErr: () => {} });
    register(program, { env: {} });
    await expect(program.parseAsync(['node', 'tokenwatch', 'config', 'check', '--config', fixture('empty.yaml')])).rejects.toMatchObject({
      code: CONFIG_INVALID_CODE,
      exitCode: 2,
    });
  });
});

describe('tokenwatch config check inside the real CLI program', () => {
  it('keeps one problem per line and exits 2 through runCli', async () => {
    const { runCli } = await import('../../src/cli/program.js');
    const chunks: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => {
      chunks.push(String(s));
      return true;
    }) as typeof process.stderr.write;
    let code: number;
    try {
      code = await runCli(['node', 'tokenwatch', 'config', 'check', '--config', fixture('invalid-many.yaml')], [(p) => register(p, { env: {} })]);
    } finally {
      process.stderr.write = write;
    }
    expect(code).toBe(2);
    const text = chunks.join('');
    expect(text.split('\n')[0]).toBe(`tokenwatch: invalid configuration in ${fixture('invalid-many.yaml')} (13 problems):`);
    expect(text).toContain('\n✖ unknown key (line 1)\n  → at stor\n');
  });
});
