/** `store.postgres` in the config file (src/config/schema.ts): URL or fields, defaults, every wrong field named, the file form round trip. */
import { describe, expect, it } from 'vitest';
import { toFileForm } from '../../src/config/render.js';
import { ConfigError, type ConfigIssue, parseConfig } from '../../src/config/schema.js';

const cluster = { name: 'dev', audit: { file: { path: '/var/log/audit.log' } } };
const withPg = (postgres: unknown) => ({ store: { postgres }, clusters: [cluster] });

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i: ConfigIssue) => `${i.path.join('.')} → ${i.message}`).sort();
  }
  throw new Error('expected a ConfigError');
}

describe('store.postgres', () => {
  it('is absent by default (the SQLite file is the store)', () => {
    expect(parseConfig({ clusters: [cluster] }, {}).store).toEqual({ path: './data/tokenwatch.db' });
  });

  it('takes a URL, normalised to host, port, database and user, with the defaults filled', () => {
    const config = parseConfig(withPg({ url: 'postgres://tokenwatch@db.example.com/tw', passwordFrom: { file: '/secrets/pg/password' } }), {});
    expect(config.store.postgres).toEqual({
      host: 'db.example.com',
      port: 5432,
      database: 'tw',
      user: 'tokenwatch',
      passwordFrom: { file: '/secrets/pg/password' },
      sslmode: 'verify-full',
      poolSize: 10,
      statementTimeout: 30_000,
      connectTimeout: 10_000,
      queryTimeout: 35_000, // statementTimeout + 5 s
    });
  });

  it('takes fields, and gives them back in the file form', () => {
    const fields = { host: '10.0.0.5', port: 6432, database: 'tw', user: 'tw', passwordFrom: { env: 'PGPASS' }, sslmode: 'verify-ca', caFile: '/ca.pem', poolSize: 4, statementTimeout: '5s', connectTimeout: '2s', queryTimeout: '8s' };
    const raw = withPg(fields);
    const env = { PGPASS: 'x' };
    const config = parseConfig(raw, env);
    expect(config.store.postgres).toMatchObject({ host: '10.0.0.5', port: 6432, sslmode: 'verify-ca', caFile: '/ca.pem', poolSize: 4, statementTimeout: 5000, connectTimeout: 2000, queryTimeout: 8000 });
    expect(toFileForm(config).store).toEqual({ path: './data/tokenwatch.db', postgres: fields });
    expect(parseConfig(toFileForm(config), env).store).toEqual(config.store);
  });

  it('names every wrong field at once', () => {
    expect(issuesOf(() => parseConfig(withPg({ url: 'mysql://a:hunter2@h/db?sslmode=require', host: 'h', poolSize: 0, sslmode: 'prefer', passwordFrom: { env: 'A', file: '/f' }, statementTimeout: 'soon', extra: 1 }), {}))).toEqual([
      'store.postgres.extra → unknown key',
      'store.postgres.passwordFrom → expected exactly one of env, file',
      'store.postgres.poolSize → Too small: expected number to be >=1',
      'store.postgres.sslmode → Invalid option: expected one of "disable"|"require"|"verify-ca"|"verify-full"',
      expect.stringMatching(/^store\.postgres\.statementTimeout → expected a duration/),
      'store.postgres.url → expected the postgres:// or postgresql:// scheme, got mysql://',
      'store.postgres.url → must not carry a password (the config file holds no secrets): use store.postgres.passwordFrom',
      'store.postgres.url → must not carry parameters: give TLS and pool settings as store.postgres fields (sslmode, caFile, poolSize, …)',
      'store.postgres.url → url and host are exclusive: give the server either as a URL or as fields',
    ]);
  });

  it('needs a server, all of host/database/user without a URL, the password variable set, and caFile only where it is checked', () => {
    expect(issuesOf(() => parseConfig(withPg({}), {}))).toEqual(['store.postgres → needs url, or host, database and user']);
    expect(issuesOf(() => parseConfig(withPg({ host: 'h' }), {}))).toEqual([
      'store.postgres.database → required (or give url instead)',
      'store.postgres.user → required (or give url instead)',
    ]);
    expect(issuesOf(() => parseConfig(withPg({ url: 'postgres://h/db', passwordFrom: { env: 'PG_PW' }, sslmode: 'require', caFile: '/ca.pem' }), {}))).toEqual([
      'env.PG_PW → required by store.postgres.passwordFrom.env (the PostgreSQL password)',
      'store.postgres.caFile → is used only with sslmode verify-ca or verify-full (sslmode is require, which checks no certificate)',
      'store.postgres.url → needs a user (postgres://USER@host/database)',
    ]);
  });

  it('never shows a password of a refused URL in the error', () => {
    const err = (() => {
      try {
        parseConfig(withPg({ url: 'postgres://u:hunter2-secret@h/db' }), {});
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected an error');
    })();
    expect(err.message).toContain('must not carry a password');
    expect(err.message).not.toContain('hunter2-secret');
  });
});
