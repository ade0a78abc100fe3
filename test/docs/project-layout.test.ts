/**
 * The "Project layout" of docs/development.md cannot drift from the tree: its folder table names exactly the folders of `src/` (and
 * `errors.ts`), its import order and shared modules are those of `.dependency-cruiser.cjs` (IMPORT_ORDER, SHARED), every
 * stage of its flow diagram is a row of the table, and `npm run lint` enforces that order (dependency-cruiser's
 * `stage-*`, `shared-imports-only-shared` and `every-folder-has-a-place` rules of `.dependency-cruiser.cjs`, which
 * fail lint on any import against it).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** The part of a dependency-cruiser `forbidden` rule this test reads. */
interface CruiserRule {
  name: string;
  severity: string;
  from: { path?: string; pathNot?: string };
  to: { path?: string | string[] };
}

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

  // The import graph itself is checked by `npm run lint` (dependency-cruiser with these rules, part of `npm test`); this
  // test checks that lint enforces exactly the order above, instead of running dependency-cruiser a second time.
  it('npm run lint enforces that order: each stage may not import the stages after it, the shared modules no stage', () => {
    const config = createRequire(import.meta.url)(join(ROOT, '.dependency-cruiser.cjs')) as { forbidden: CruiserRule[] };
    const rule = (name: string) => config.forbidden.find((r) => r.name === name);
    const order = cruiserList('IMPORT_ORDER');
    const shared = cruiserList('SHARED');
    order.slice(0, -1).forEach((stage, i) => {
      const r = rule(`stage-${stage}`);
      expect(r, `a stage-${stage} rule`).toBeDefined();
      expect(r!.severity).toBe('error');
      expect(new RegExp(r!.from.path!).test(`src/${stage}/x.ts`)).toBe(true);
      for (const other of [...order, ...shared]) {
        const forbidden = new RegExp(r!.to.path as string).test(`src/${other}/x.ts`);
        expect(forbidden, `${stage} → ${other}`).toBe(order.indexOf(other) > i);
      }
    });
    const sharedRule = rule('shared-imports-only-shared')!;
    expect(sharedRule.severity).toBe('error');
    for (const s of [...shared.map((x) => `src/${x}/x.ts`), 'src/errors.ts']) expect(new RegExp(sharedRule.from.path!).test(s), s).toBe(true);
    for (const stage of order) expect(new RegExp(sharedRule.to.path as string).test(`src/${stage}/x.ts`), stage).toBe(true);
    const place = rule('every-folder-has-a-place')!;
    expect(place.severity).toBe('error');
    expect(new RegExp(place.from.pathNot!).test('src/newstage/x.ts')).toBe(false);
    for (const folder of [...order, ...shared]) expect(new RegExp(place.from.pathNot!).test(`src/${folder}/x.ts`), folder).toBe(true);
    // and lint runs dependency-cruiser with this config on src/
    const lint = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.lint!;
    expect(lint).toContain('depcruise src --config .dependency-cruiser.cjs');
    expect((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.test).toContain('npm run lint');
  });
});
