/** The approval core carries codes and facts; the Slack wording (mentions `<@U…>`, `<!subteam^…>`) lives in src/slack/blocks. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('src/approvals has no Slack syntax', () => {
  it('no file in src/approvals contains `<@` or `<!subteam`', () => {
    const dir = new URL('../../src/approvals/', import.meta.url).pathname;
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(0);
    const hits = files.flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
        .filter(({ line }) => line.includes('<@') || line.includes('<!subteam')),
    );
    expect(hits).toEqual([]);
  });
});
