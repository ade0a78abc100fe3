/**
 * The chart's values.schema.json `config` part is generated from the zod config schema (`npm run chart:schema`,
 * scripts/chart-schema.ts): the committed file is what the script writes, and a real helm 3.17 refuses a typo or a
 * wrong type inside `config:` with its path, while every config tokenwatch accepts passes.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/index.js';
import { generateValuesSchema, VALUES_SCHEMA } from '../../scripts/chart-schema.js';
import { helmBinary, helmLint, helmTemplate, SITE_CHANNEL } from './helm.js';

const ROOT = resolve(import.meta.dirname, '../..');
const { skip } = helmBinary();
const ENV = { SLACK_BOT_TOKEN: 'xoxb-x', SLACK_APP_TOKEN: 'xapp-x', SLACK_SIGNING_SECRET: '8f742231b10e8888abcd99yyyzzz85a5' };

/** The chart's default `config` (values.yaml), as a starting point for bad values. */
function defaultConfig(): { clusters: Record<string, unknown>[] } & Record<string, unknown> {
  return (parseYaml(readFileSync(join(ROOT, 'charts/tokenwatch/values.yaml'), 'utf8')) as { config: { clusters: Record<string, unknown>[] } }).config;
}

/** helm's error for `config`, or '' when the render passed. */
function renderError(config: unknown): string {
  try {
    helmTemplate({ values: { config } });
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

describe('values.schema.json config from the zod schema', () => {
  it('the committed file is what `npm run chart:schema` writes (run it after changing src/config/schema.ts)', () => {
    const committed = readFileSync(VALUES_SCHEMA, 'utf8');
    expect(generateValuesSchema(committed)).toBe(committed);
    const config = (JSON.parse(committed) as { properties: { config: { properties: Record<string, unknown>; additionalProperties: unknown } } }).properties.config;
    // Every top-level key of the file schema, and no unknown key allowed.
    expect(Object.keys(config.properties)).toEqual(['store', 'shards', 'http', 'log', 'slack', 'remediation', 'poll', 'findings', 'retention', 'clusters']);
    expect(config.additionalProperties).toBe(false);
  });

  it('the generator replaces only config: a changed config part is rewritten, the hand-written rest kept', () => {
    const committed = JSON.parse(readFileSync(VALUES_SCHEMA, 'utf8')) as { properties: Record<string, unknown> };
    const stale = JSON.stringify({ ...committed, properties: { ...committed.properties, config: { type: 'object' } } });
    const regenerated = JSON.parse(generateValuesSchema(stale)) as typeof committed;
    expect(regenerated).toEqual(committed);
  });
});

describe.skipIf(skip !== undefined)('helm refuses a bad config inside the chart values, naming the path', () => {
  it('a typo in a cluster key', () => {
    const config = defaultConfig();
    const { schedule, ...rest } = config.clusters[0]!;
    config.clusters[0] = { ...rest, schedul: schedule };
    const message = renderError(config);
    expect(message).toContain("values don't meet the specifications of the schema(s)");
    expect(message).toMatch(/config\.clusters\.0: Additional property schedul is not allowed/);
  });

  it('a typo in a nested section, a wrong type and a value outside the enum', () => {
    expect(renderError({ ...defaultConfig(), slack: { enabled: true, mode: 'socket', aprovals: {} } })).toMatch(/config\.slack: Additional property aprovals is not allowed/);
    expect(renderError({ ...defaultConfig(), http: { port: 'eighty' } })).toMatch(/config\.http\.port: Invalid type\. Expected: integer, given: string/);
    expect(renderError({ ...defaultConfig(), log: { level: 'verbose' } })).toMatch(/config\.log\.level: config\.log\.level must be one of the following/);
  });

  it('passes the chart defaults (helm lint --strict) and the repository example config, which tokenwatch accepts too', () => {
    expect(helmLint()).toContain('0 chart(s) failed');
    for (const file of ['config.example.yaml', 'examples/serve.yaml']) {
      // The chart refuses the example channel id with Slack on (values.schema.json): an install sets its own.
      const config = parseYaml(readFileSync(join(ROOT, file), 'utf8').replaceAll('C0123456789', SITE_CHANNEL)) as Record<string, unknown>;
      expect(() => parseConfig(config, ENV)).not.toThrow();
      expect(renderError(config)).toBe('');
    }
  });
});
