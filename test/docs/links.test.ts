/**
 * The links of README.md and docs/ lead somewhere: every relative Markdown link names a file or folder of the
 * repository, and every `#anchor` (in the same page or another Markdown page) is a heading of its target, slugged as
 * GitHub slugs headings (lower case, punctuation other than `-` and `_` dropped, spaces to `-`, `-1`, `-2`… for
 * repeats; `<a id="…">` anchors count too). Sections moved out of README keep working links this way.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** README.md and every Markdown file under docs/. */
function pages(): string[] {
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((e) => {
      const p = join(d, e);
      return statSync(p).isDirectory() ? walk(p) : e.endsWith('.md') ? [p] : [];
    });
  return [join(ROOT, 'README.md'), ...walk(join(ROOT, 'docs'))];
}

/** The text outside fenced code blocks (links in code are not links). */
function prose(markdown: string): string {
  return markdown.replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
}

/** GitHub's anchors of the headings of `markdown`. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  for (const m of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!); // explicit anchors
  return out;
}

describe('links in README.md and docs/', () => {
  const broken: string[] = [];
  let count = 0;
  for (const page of pages()) {
    const text = readFileSync(page, 'utf8');
    for (const m of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1]!;
      if (/^[a-z]+:/i.test(href)) continue; // https:, mailto:
      count++;
      const [path, anchor] = href.split('#') as [string, string | undefined];
      const target = path ? join(dirname(page), decodeURIComponent(path)) : page;
      const where = `${relative(ROOT, page)}: ${href}`;
      if (!existsSync(target)) broken.push(`${where} (no such file)`);
      else if (anchor && target.endsWith('.md') && !anchors(readFileSync(target, 'utf8')).has(anchor)) broken.push(`${where} (no such heading)`);
    }
  }

  it('the slugs are GitHub’s', () => {
    expect([...anchors('# `tokenwatch scan`\n## JSON output (contract)\n### Node probe (`tokenwatch probe`)\n## 1. Create the Slack app\n## A\n## A\n')]).toEqual([
      'tokenwatch-scan',
      'json-output-contract',
      'node-probe-tokenwatch-probe',
      '1-create-the-slack-app',
      'a',
      'a-1',
    ]);
  });

  it('every relative link names a file of the repository and every anchor a heading of its page', () => {
    expect(count).toBeGreaterThan(50);
    expect(broken).toEqual([]);
  });
});
