/**
 * The "Project layout" of docs/development.md cannot drift from the tree: its folder table names exactly the folders of `src/` (and
 * `errors.ts`), its import order and shared modules are those of `.dependency-cruiser.cjs` (IMPORT_ORDER, SHARED), every
 * stage of its flow diagram is a row of the table, and the folder graph that
 * `depcruise src --config .dependency-cruiser.cjs --output-type archi` draws has no edge against that order.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** The docs/development.md section under `## Project layout`, up to the next `## ` heading. */
function layoutSection(): string {
  const readme = readFileSync(join(ROOT, 'docs/development.md'), 'utf8');
  const start = readme.indexOf('\n## Project layout\n');
  expect(start, 'docs/development.md has a "## Project layout" section').toBeGreaterThan(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** A `const NAME = ['a', 'b'];` list of `.dependency-cruiser.cjs`. */
function cruiserList(name: string): string[] {
  const text = readFileSync(join(ROOT, '.dependency-cruiser.cjs'), 'utf8');
  const m = new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(text);
  expect(m, `.dependency-cruiser.cjs defines ${name}`).not.toBeNull();
  return [...m![1]!.matchAll(/'([^']+)'/g)].map((x) => x[1]!);
}

/**
 * The table's stages (first column) and what its folder column names directly under `src/`: `src/<name>/` folders and
 * `src/<file>.ts` files (a deeper path such as `src/remediation/verify.ts` is not an entry of `src/`).
 */
function tableEntries(section: string): { stages: string[]; entries: Set<string> } {
  const stages: string[] = [];
  const entries = new Set<string>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || cells[1] === 'stage' || /^-+$/.test(cells[1] ?? '')) continue;
    stages.push(cells[1]!);
    for (const m of (cells[2] ?? '').matchAll(/`src\/([^`/]+)\/?`/g)) entries.add(m[1]!);
  }
  return { stages, entries };
}

/** The import-order line of the layout's diagram (`import order (<shared modules>):` then `a → b → …`). */
function readmeImportOrder(section: string): { order: string[]; sharedText: string } {
  const m = /import order \(([^)]*)\):\n([^\n]+)/.exec(section);
  expect(m, 'the diagram has an "import order (…):" line').not.toBeNull();
  return { order: m![2]!.split('→').map((s) => s.trim()), sharedText: m![1]! };
}

describe('docs/development.md "Project layout"', () => {
  const section = layoutSection();

  it('its folder table names exactly the folders of src/ and errors.ts', () => {
    const real = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory() || (e.isFile() && e.name.endsWith('.ts')))
      .map((e) => e.name)
      .sort();
    expect([...tableEntries(section).entries].sort()).toEqual(real);
  });

  it('its import order and shared modules are those of .dependency-cruiser.cjs', () => {
    const { order, sharedText } = readmeImportOrder(section);
    expect(order).toEqual(cruiserList('IMPORT_ORDER'));
    for (const s of [...cruiserList('SHARED'), 'errors.ts']) expect(sharedText, 'the shared modules named in the import-order line').toContain(s);
  });

  it('every stage of the flow diagram is a row of the table', () => {
    const flow = section.split('\n').find((l) => l.startsWith('sources ──►'));
    expect(flow, 'the diagram has the flow line "sources ──► …"').toBeDefined();
    const { stages } = tableEntries(section);
    for (const stage of flow!.split('──►').map((s) => s.trim())) expect(stages).toContain(stage);
  });

  it('the folder graph of depcruise --output-type archi has no import against that order', { timeout: 120_000 }, () => {
    const res = spawnSync(process.execPath, [join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs'), 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'archi'], {
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    expect(res.status, res.stderr).toBe(0);
    const edges = [...res.stdout.matchAll(/^\s*"src\/([^"/]+)" -> "src\/([^"/]+)"/gm)].map((m) => [m[1]!, m[2]!] as const);
    expect(edges.length).toBeGreaterThan(10);
    const order = cruiserList('IMPORT_ORDER');
    const shared = new Set([...cruiserList('SHARED'), 'errors.ts']);
    const nodes = new Set(edges.flat());
    for (const folder of nodes) expect([...order, ...shared], `${folder} has a place in the import order`).toContain(folder);
    const against = edges.filter(([from, to]) => {
      if (shared.has(to)) return false; // every stage may import the shared modules
      if (shared.has(from)) return true; // the shared modules import no stage
      return order.indexOf(to) >= order.indexOf(from);
    });
    expect(against).toEqual([]);
  });
});
