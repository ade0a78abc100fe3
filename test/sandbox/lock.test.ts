import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockDataDir } from '../../src/sandbox/sandbox.js';
import { isLoopbackHost } from '../../src/sandbox/server.js';

describe('sandbox state folder lock', () => {
  it('refuses a folder locked by a running process, naming its pid, and changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-lock-'));
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'sandbox.lock'), String(other.pid));
      await expect(lockDataDir(dir)).rejects.toThrow(`a sandbox is already running on ${dir} (pid ${other.pid})`);
      expect(readFileSync(join(dir, 'sandbox.lock'), 'utf8')).toBe(String(other.pid));
    } finally {
      other.kill();
    }
  });

  it('takes over a lock left by a process that is gone, and releases it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-lock-'));
    const gone = spawn('true');
    await new Promise((r) => gone.once('exit', r));
    writeFileSync(join(dir, 'sandbox.lock'), String(gone.pid));
    const release = await lockDataDir(dir);
    expect(readFileSync(join(dir, 'sandbox.lock'), 'utf8')).toBe(String(process.pid));
    await release();
    expect(existsSync(join(dir, 'sandbox.lock'))).toBe(false);
  });
});

describe('isLoopbackHost (sandbox DNS-rebinding guard)', () => {
  it('accepts only loopback names, with or without a port', () => {
    for (const ok of ['127.0.0.1', '127.0.0.1:8787', 'localhost', 'LOCALHOST:1', '[::1]', '[::1]:8787', '127.1.2.3:80']) expect(isLoopbackHost(ok)).toBe(true);
    for (const bad of [undefined, '', 'evil.example', 'evil.example:8787', '127.0.0.1.evil.example', '10.0.0.1', '0.0.0.0:8787', '[::]:1', 'localhost.evil.example', '127.0.0.256', 'a:b:c']) expect(isLoopbackHost(bad)).toBe(false);
  });
});
