/**
 * Code comments cite the design notes as `docs/design/<file>.md`, with a section (`§7` in domain.md and stack.md,
 * a quoted heading such as `"Terms"` in architecture.md and contracts.md). Every cited file exists, every cited
 * section is a heading of it, and no comment cites the old, out-of-repository names (`shared/docs/…`, `design.md`,
 * `peers.md`, or `domain.md` / `stack.md` without their folder). Nothing a reader of the repository lacks is cited
 * anywhere in it (src, test, bench, scripts, examples, docs, README.md, SECURITY.md, manifests, charts): no issue
 * number ("issue 13", "issue #4", "(#4)") and no path outside the repository (`shared/…`, `../shared`, `/work/…`).
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

/** Text files a reader of the repository sees; generated data (bench/data, test/artifacts) and node_modules are not. */
const READER_ROOTS = ['src', 'test', 'bench', 'scripts', 'examples', 'docs', 'manifests', 'charts', 'README.md', 'SECURITY.md', 'config.example.yaml'];
const TEXT = /\.(ts|mts|cts|js|mjs|cjs|json|md|ya?ml|tpl|txt|html|css|wat)$|^Dockerfile$/;

function readerFiles(p: string): string[] {
  if (!existsSync(p)) return [];
  if (!statSync(p).isDirectory()) return [p];
  return readdirSync(p).flatMap((e) => {
    const q = join(p, e);
    if (e === 'node_modules' || e === 'artifacts' || q === join(ROOT, 'bench', 'data')) return [];
    return statSync(q).isDirectory() ? readerFiles(q) : TEXT.test(e) ? [q] : [];
  });
}

/** An issue number of this project's tracker; `owner/repo#123` and `…/issues/123` URLs are public and allowed. */
const ISSUE = /\bissues?\s*#?\d|\(#\d+\)/i;
/** A path outside the repository: the workplace's shared folder or its absolute root. */
const OUTSIDE = /(^|[\s`'"(])(\.\.\/)*shared\/|\/work\//;

describe('citations a reader of the repository can follow', () => {
  const hits = (re: RegExp) =>
    READER_ROOTS.flatMap((r) => readerFiles(join(ROOT, r)))
      .filter((f) => relative(ROOT, f) !== THIS_FILE)
      .flatMap((f) => {
        const rel = relative(ROOT, f);
        const named = re.test(rel.replace(/\//g, ' ')) ? [`${rel}: file name`] : [];
        return [
          ...named,
          ...readFileSync(f, 'utf8')
            .split('\n')
            .flatMap((line, i) => (re.test(line) ? [`${rel}:${i + 1}: ${line.trim().slice(0, 160)}`] : [])),
        ];
      });

  it('the scan reads the docs, the manifests and the chart too', () => {
    const read = READER_ROOTS.flatMap((r) => readerFiles(join(ROOT, r))).map((f) => relative(ROOT, f));
    for (const f of ['README.md', 'docs/design/architecture.md', 'manifests/probe/kustomization.yaml', 'charts/tokenwatch/values.yaml']) expect(read).toContain(f);
  });

  it('the patterns catch what they forbid and pass public references', () => {
    for (const bad of ['see issue 13', 'Issue #10 §3', 'a fix (#4)', 'test/issue9.test.ts'.replace(/\//g, ' ')]) expect(bad).toMatch(ISSUE);
    for (const ok of ['slackapi/bolt-js#1906', 'https://github.com/aws/amazon-vpc-cni-k8s/issues/1868', 'a GitHub issue link']) expect(ok).not.toMatch(ISSUE);
    for (const bad of ['(shared/cases; x)', '../shared/cases/a', 'see /work/notes']) expect(bad).toMatch(OUTSIDE);
    for (const ok of ['a shared store', 'src/sandbox/fakes/shared.ts']) expect(ok).not.toMatch(OUTSIDE);
  });

  it('no issue number of the project tracker ("issue 13", "issue #4", "(#4)")', () => {
    expect(hits(ISSUE)).toEqual([]);
  });

  it('no path outside the repository (shared/…, ../shared, /work/…)', () => {
    expect(hits(OUTSIDE)).toEqual([]);
  });
});

/** A backticked repository path of product code (`src/…`); placeholders (`<name>`, globs, `…`) are not paths. */
const SRC_PATH = /`(src\/[\w./-]+)`/g;
/**
 * Whether `path` is meant as ours: its first part after `src/` is an entry of this repository's src/. Paths of other
 * projects cited in comments (bolt-js's `src/receivers/verify-request.ts`, node-cron's `src/tasks/…`) are not.
 */
const OURS = new Set(readdirSync(join(ROOT, 'src')));
const isOurs = (path: string): boolean => OURS.has(path.split('/')[1] ?? '');

describe('backticked src/ paths in comments and docs name files that exist', () => {
  const cited = READER_ROOTS.flatMap((r) => readerFiles(join(ROOT, r)))
    .filter((f) => relative(ROOT, f) !== THIS_FILE)
    .flatMap((f) => {
      const rel = relative(ROOT, f);
      return readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) => [...line.matchAll(SRC_PATH)].map((m) => ({ where: `${rel}:${i + 1}`, path: m[1]!.replace(/[.,]$/, '') })))
        .filter((c) => isOurs(c.path));
    });

  it('there are such paths (the scan works)', () => {
    expect(cited.length).toBeGreaterThan(100);
  });

  it('every one resolves to a file or folder of the repository', () => {
    expect(cited.filter((c) => !existsSync(join(ROOT, c.path))).map((c) => `${c.where}: ${c.path}`)).toEqual([]);
  });
});

/** The headings of a Markdown text, outside fenced code blocks. */
function markdownHeadings(text: string): string[] {
  let fenced = false;
  return text.split('\n').flatMap((l) => {
    if (/^\s*(```|~~~)/.test(l)) fenced = !fenced;
    return !fenced && /^#{1,6}\s/.test(l) ? [l.trim()] : [];
  });
}

describe('a Markdown document names each heading once', () => {
  const docs = ['README.md', 'SECURITY.md', 'docs'].flatMap((r) => readerFiles(join(ROOT, r))).filter((f) => f.endsWith('.md'));

  it('finds headings outside code blocks only', () => {
    expect(markdownHeadings('# A\n```sh\n# a comment\n```\n## B\n')).toEqual(['# A', '## B']);
  });

  it('no heading (same level, same text) is repeated within one document: a link to it would reach the first only', () => {
    const repeated = docs.flatMap((f) => {
      const hs = markdownHeadings(readFileSync(f, 'utf8'));
      return [...new Set(hs.filter((h, i) => hs.indexOf(h) !== i))].map((h) => `${relative(ROOT, f)}: ${h}`);
    });
    expect(repeated).toEqual([]);
  });
});
