import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { PostgresStoreError } from '../../src/store/postgres.js';
import { isStoreUnavailable } from '../../src/store/unavailable.js';
import { failureMessage } from '../../src/slack/listeners/deps.js';

describe('isStoreUnavailable', () => {
  it('is true for a PostgreSQL error without SQLSTATE (connection refused) or of class 08 / 57P, also as a cause', () => {
    expect(isStoreUnavailable(new PostgresStoreError('connect ECONNREFUSED 127.0.0.1:5432'))).toBe(true);
    expect(isStoreUnavailable(new PostgresStoreError('terminating connection due to administrator command', '57P01'))).toBe(true);
    expect(isStoreUnavailable(new PostgresStoreError('connection failure', '08006'))).toBe(true);
    expect(isStoreUnavailable(new Error('poll failed', { cause: new PostgresStoreError('the database system is starting up', '57P03') }))).toBe(true);
  });

  it('is false for a statement the server refused, SQLite errors and other errors', () => {
    expect(isStoreUnavailable(new PostgresStoreError('duplicate key', '23505'))).toBe(false);
    expect(isStoreUnavailable(new PostgresStoreError('canceling statement due to statement timeout', '57014'))).toBe(false);
    expect(isStoreUnavailable(new StoreError('database or disk is full'))).toBe(false);
    expect(isStoreUnavailable(new Error('x'))).toBe(false);
    expect(isStoreUnavailable('x')).toBe(false);
  });

  it('makes Slack answer that the store is unavailable, and nothing about it otherwise', () => {
    expect(failureMessage(new PostgresStoreError('connect ECONNREFUSED 127.0.0.1:5432'), 'tokenwatch could not answer this command; see its logs.').text).toBe(
      "tokenwatch's store (its database) is unavailable right now, so nothing was changed. Try again in a minute.",
    );
    expect(failureMessage(new Error('boom'), 'tokenwatch could not answer this command; see its logs.').text).toBe('tokenwatch could not answer this command; see its logs.');
  });
});
