/**
 * No function of product code is longer than {@link MAX_LINES} lines: a long function hides the flow of data in one
 * place (the poll used to be one 291-line method). Read with the TypeScript compiler API (`ts.createSourceFile`, no
 * type checking), every function-like node with a body counts: declarations, methods, arrows, function expressions,
 * accessors, constructors. Test fakes (`src/sandbox/fakes/`) are protocol servers kept whole on purpose and are not
 * counted; `src/findings/catalog.json` and other data are not TypeScript. The exceptions below are listed with their
 * reason; one that shrinks below the limit must leave the list (the test says so).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const MAX_LINES = 150;

/** `file:function` → why it may be longer. */
const EXCEPTIONS: Record<string, string> = {
  'src/cli/commands/scan.ts:register': 'the commander declaration of every `scan` option and its help text, then one action',
  'src/sandbox/sandbox.ts:startSandbox': 'the sandbox start-up: fakes, config, serve and the page in one sequence a reader follows top to bottom',
  'src/sandbox/server.ts:startPageServer': "the sandbox page's HTTP routes, one handler per route in one table",
};

interface LongFunction {
  key: string;
  where: string;
  lines: number;
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) return relative(ROOT, p) === 'src/sandbox/fakes' ? [] : sources(p);
    return /\.(ts|mts|cts)$/.test(e) && !e.endsWith('.d.ts') ? [p] : [];
  });
}

/** The functions of `text` longer than `max` lines (first line of the node to its last). */
function longFunctions(file: string, text: string, max: number): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: LongFunction[] = [];
  const nameOf = (n: ts.Node): string => {
    const named = (n as { name?: ts.Node }).name;
    if (named) return named.getText(sf);
    if (ts.isVariableDeclaration(n.parent) || ts.isPropertyAssignment(n.parent) || ts.isPropertyDeclaration(n.parent)) return n.parent.name.getText(sf);
    return ts.isConstructorDeclaration(n) ? 'constructor' : '(anonymous)';
  };
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && (n as { body?: ts.Node }).body) {
      const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      const lines = end - start + 1;
      if (lines > max) out.push({ key: `${file}:${nameOf(n)}`, where: `${file}:${start + 1}`, lines });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

describe(`no function in src/ is longer than ${MAX_LINES} lines`, () => {
  const found = sources(join(ROOT, 'src')).flatMap((f) => longFunctions(relative(ROOT, f), readFileSync(f, 'utf8'), MAX_LINES));

  it('the check counts a long function, and an arrow by its variable', () => {
    const body = Array.from({ length: 5 }, (_, i) => `  const x${i} = ${i};`).join('\n');
    expect(longFunctions('a.ts', `export function f() {\n${body}\n}\nconst g = () => {\n${body}\n};\n`, 4).map((l) => [l.key, l.lines])).toEqual([
      ['a.ts:f', 7],
      ['a.ts:g', 7],
    ]);
    expect(longFunctions('a.ts', `function f() {\n${body}\n}\n`, 7)).toEqual([]);
  });

  it('none but the listed exceptions', () => {
    expect(found.filter((l) => !(l.key in EXCEPTIONS)).map((l) => `${l.where} ${l.key} (${l.lines} lines)`)).toEqual([]);
  });

  it('every exception is still needed (a function that was split leaves the list)', () => {
    expect(Object.keys(EXCEPTIONS).filter((k) => !found.some((l) => l.key === k))).toEqual([]);
  });
});
