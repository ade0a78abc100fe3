/**
 * Code comments cite the design notes as `docs/design/<file>.md`, with a section (`§7` in domain.md and stack.md,
 * a quoted heading such as `"Terms"` in architecture.md and contracts.md). Every cited file exists, every cited
 * section is a heading of it, and no comment cites the old, out-of-repository names (`shared/docs/…`, `design.md`,
 * `peers.md`, or `domain.md` / `stack.md` without their folder).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const DESIGN = join(ROOT, 'docs/design');
const SCANNED = ['src', 'test', 'bench', 'scripts'];
const EXTENSIONS = /\.(ts|mts|cts|js|mjs|cjs|json)$/;

/** The source files under `dir`; generated and git-ignored folders (bench/data, test/artifacts) are not sources. */
function files(dir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    if (e === 'node_modules' || e === 'artifacts' || join(dir, e) === join(ROOT, 'bench', 'data')) return [];
    const p = join(dir, e);
    return statSync(p).isDirectory() ? files(p) : EXTENSIONS.test(e) ? [p] : [];
  });
}

interface Citation {
  where: string;
  file: string;
  /** `§3` sections and quoted headings right after the file name (`§1 and §6`, `"Slack and approvals" and "Security"`). */
  sections: string[];
  quoted: string[];
}

const THIS_FILE = relative(ROOT, import.meta.filename);

function citations(): { cited: Citation[]; stale: string[] } {
  const cited: Citation[] = [];
  const stale: string[] = [];
  for (const f of SCANNED.flatMap((d) => files(join(ROOT, d)))) {
    const rel = relative(ROOT, f);
    if (rel === THIS_FILE) continue;
    readFileSync(f, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const where = `${rel}:${i + 1}`;
        for (const m of line.matchAll(/docs\/design\/([\w-]+\.md)((?:(?:,|\sand)?\s*(?:§\d+|"[^"]+"))*)/g)) {
          const tail = m[2] ?? '';
          cited.push({ where, file: m[1]!, sections: [...tail.matchAll(/§\d+/g)].map((x) => x[0]), quoted: [...tail.matchAll(/"([^"]+)"/g)].map((x) => x[1]!) });
        }
        const old = line.replace(/docs\/design\/[\w-]+\.md/g, '');
        if (/shared\/docs|\bdesign\.md|\bpeers\.md|\b(domain|stack|architecture|contracts|prior-art)\.md/.test(old)) stale.push(`${where}: ${line.trim()}`);
      });
  }
  return { cited, stale };
}

describe('design-note citations in src, test, bench and scripts', () => {
  const { cited, stale } = citations();
  const headings = (file: string) =>
    (existsSync(join(DESIGN, file)) ? readFileSync(join(DESIGN, file), 'utf8') : '')
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .map((l) => l.replace(/^#+\s*/, '').replace(/`/g, ''));

  it('there are citations (the scan works)', () => {
    expect(cited.length).toBeGreaterThan(40);
    expect(new Set(cited.map((c) => c.file))).toEqual(new Set(['domain.md', 'stack.md', 'architecture.md', 'contracts.md', 'prior-art.md']));
  });

  it('every cited docs/design/<file>.md exists', () => {
    const present = new Set(readdirSync(DESIGN));
    expect(cited.filter((c) => !present.has(c.file)).map((c) => `${c.where}: ${c.file}`)).toEqual([]);
  });

  it('every cited section is a heading of its file (§N, or a quoted heading prefix)', () => {
    const missing = cited.flatMap((c) => {
      const hs = headings(c.file);
      return [
        ...c.sections.filter((s) => !hs.some((h) => h.startsWith(`${s} `))).map((s) => `${c.where}: ${c.file} ${s}`),
        ...c.quoted.filter((q) => !hs.some((h) => h.startsWith(q.replace(/`/g, '')))).map((q) => `${c.where}: ${c.file} "${q}"`),
      ];
    });
    expect(missing).toEqual([]);
  });

  it('no citation of the old names outside the repository (shared/docs, design.md, peers.md, a bare domain.md)', () => {
    expect(stale).toEqual([]);
  });
});
