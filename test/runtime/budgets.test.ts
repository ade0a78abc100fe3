/**
 * A shared request budget whose store cannot be read (src/runtime/budgets.ts): every fallback is counted in
 * `tokenwatch_rate_budget_store_errors_total`; the log says so at most once a minute, with no statement data.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { budgetStoreError } from '../../src/runtime/budgets.js';

describe('budgetStoreError', () => {
  it('counts each call by budget and logs the first of a minute only, with the key and the message', async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const metrics = new Metrics();
    const onError = budgetStoreError('cloudwatch', metrics, createLogger({ destination }));
    const err = Object.assign(new Error('connection terminated'), { parameters: ['secret-row-value'] });
    for (let i = 0; i < 3; i++) onError('cloudwatch/111122223333/eu-west-1', err);

    const counted = (await metrics.rateBudgetStoreErrors.get()).values;
    expect(counted).toEqual([expect.objectContaining({ labels: { budget: 'cloudwatch' }, value: 3 })]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'warn', budget: 'cloudwatch', key: 'cloudwatch/111122223333/eu-west-1', error: 'connection terminated', leftOut: 0 });
    expect(JSON.stringify(lines)).not.toContain('secret-row-value');
  });
});
