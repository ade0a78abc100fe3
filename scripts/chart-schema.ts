/**
 * `npm run chart:schema`: writes the `config` part of charts/tokenwatch/values.schema.json from the zod schema of
 * the config file (`src/config/schema.ts` `fileSchema`), so `helm lint`, `helm template` and `helm install` refuse a
 * typo or a wrong type inside the chart's `config:` with its path, as `tokenwatch config check` would, instead of a
 * crash-looping pod. The rest of values.schema.json is written by hand; this script replaces only `properties.config`
 * and keeps everything else. test/manifests/chart-schema.test.ts checks that the committed file is what it writes.
 *
 * zod 4 `z.toJSONSchema(schema, { target: 'draft-07', io: 'input' })` (https://zod.dev/json-schema): the chart's
 * schema is draft-07 (what helm 3 validates), and the input side is what a values file holds (durations as `10m`,
 * defaults optional). Rules zod checks in code (refinements, cross-field rules, the environment) stay with
 * `tokenwatch config check`, which the pod runs at start.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { fileSchema } from '../src/config/schema.js';

/** The chart's values schema file. */
export const VALUES_SCHEMA = resolve(import.meta.dirname, '../charts/tokenwatch/values.schema.json');

const CONFIG_DESCRIPTION =
  'The tokenwatch config file (config.example.yaml), generated from the zod schema by `npm run chart:schema`; ' +
  '`tokenwatch config check` also checks the cross-field rules and the environment.';

/**
 * The values schema text with `properties.config` generated from {@link fileSchema}.
 * @param current the committed values.schema.json text (its hand-written parts are kept, in their order)
 * @returns JSON, two-space indented, with a final newline
 */
export function generateValuesSchema(current: string): string {
  const values = JSON.parse(current) as { properties: Record<string, unknown> };
  const { $schema: _drop, ...config } = z.toJSONSchema(fileSchema, { target: 'draft-07', io: 'input' }) as Record<string, unknown>;
  values.properties = Object.fromEntries(
    Object.entries(values.properties).map(([k, v]) => [k, k === 'config' ? { description: CONFIG_DESCRIPTION, ...config } : v]),
  );
  return `${JSON.stringify(values, null, 2)}\n`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === import.meta.filename) {
  const before = readFileSync(VALUES_SCHEMA, 'utf8');
  const after = generateValuesSchema(before);
  if (after !== before) writeFileSync(VALUES_SCHEMA, after);
  process.stdout.write(`${VALUES_SCHEMA}: ${after === before ? 'up to date' : 'config schema regenerated'}\n`);
}
