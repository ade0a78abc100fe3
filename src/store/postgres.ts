/**
 * The PostgreSQL {@link SqlExecutor}: a `pg` 8 connection pool (docs/design/architecture.md "Store").
 *
 * - Placeholders: repository SQL uses positional `?`; {@link numberPlaceholders} rewrites them to `$1`, `$2`, … outside
 *   quoted literals, quoted identifiers, comments and dollar-quoted text.
 * - Types: `BIGINT` (int8, OID 20) and `NUMERIC` (OID 1700, what `sum()` of a BIGINT returns) come back as JavaScript
 *   numbers, through a type parser of this pool only (never `pg.types.setTypeParser`, which is global). Values are
 *   epoch ms and counts, far below 2^53.
 * - Transactions: one pooled client from `BEGIN` to `COMMIT` / `ROLLBACK` (READ COMMITTED); a nested transaction is a
 *   `SAVEPOINT`. {@link SqlExecutor.lock} is `pg_advisory_xact_lock(hashtextextended(key, 0))`, released by the
 *   transaction's end.
 * - Timeouts: `statement_timeout` (server side, per session) and `idle_in_transaction_session_timeout` (so a process
 *   that dies inside a transaction cannot hold its locks for long) are sent as startup parameters; connecting gives
 *   up after `connectTimeoutMs`. Client side, a statement without an answer after `queryTimeoutMs` fails and its
 *   connection is dropped (pg's `query_timeout`; a black-holed connection never answers, so the server's limit cannot
 *   fire), and TCP keepalive probes idle connections (pg's `keepAlive`, first probe after 5 s).
 * - Connection faults: every client has an `'error'` listener from the moment the pool creates it — idle or checked
 *   out — so a server restart or `pg_terminate_backend` fails the statements running on it (as
 *   {@link PostgresStoreError}s; the connection is dropped, not returned to the pool) instead of crashing the process
 *   with an unhandled `'error'` event; the error is reported to `onIdleError`.
 * - TLS (`sslmode`, as libpq names it: https://www.postgresql.org/docs/current/libpq-ssl.html#LIBPQ-SSL-PROTECTION):
 *   `disable` (plain TCP), `require` (encrypted, certificate not checked), `verify-ca` (certificate chain checked
 *   against `caFile`, or Node's CA store without one), `verify-full` (and the host name or IP address matched).
 * - Credentials that rotate: `pg` accepts `password` as a function called for every new connection
 *   (node-postgres docs, "Client" → `password`); {@link PasswordSource} is read there, so a rotated Secret file or
 *   environment value is used from the next connection on.
 * - Batches ({@link SqlExecutor.runMany}): one statement per parameter row, the rows' values inlined as escaped
 *   literals, sent as one multi-statement query (one round trip per 500 rows) inside the transaction.
 * - Errors: every failure is a {@link PostgresStoreError} naming the backend and the statement's first words, with the
 *   SQLSTATE; never the parameters, never the password (a data exception's message, which may quote a value, is
 *   replaced by its SQLSTATE's class).
 *
 * Sources: node-postgres docs (https://node-postgres.com/apis/client, /apis/pool, /features/ssl, /features/types);
 * PostgreSQL docs `runtime-config-client.html` (statement_timeout), `functions-admin.html#FUNCTIONS-ADVISORY-LOCKS`,
 * `errcodes-appendix.html`.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import type { Config } from '../config/types.js';
import { StoreError } from './errors.js';
import type { SqlExecutor, SqlParams, SqlRow, SqlRunResult } from './sql.js';

/** `libpq`'s TLS modes that tokenwatch supports (see the module comment). */
export type PostgresSslMode = 'disable' | 'require' | 'verify-ca' | 'verify-full';

/** Where the password is read, on every new connection: an environment variable or a file (e.g. a mounted Secret; one trailing newline is dropped). */
export type PasswordSource = { env: string } | { file: string };

/** Connection settings of {@link openPostgres}. */
export interface PostgresOptions {
  host: string;
  /** TCP port. Default 5432. */
  port?: number;
  database: string;
  user: string;
  /** Where the password comes from; none: the server must not ask for one (trust, certificate). */
  passwordFrom?: PasswordSource;
  /** A fixed password (e.g. from a `postgres://user:pass@…` URL given on the command line). `passwordFrom` wins. */
  password?: string;
  /** TLS mode. Default `verify-full`. */
  sslmode?: PostgresSslMode;
  /** PEM file of the CA certificates that sign the server's certificate (`verify-ca`, `verify-full`); read at open. */
  caFile?: string;
  /** Most connections the pool opens. Default 10. */
  poolSize?: number;
  /** Server-side limit of one statement, ms (`statement_timeout`); 0 = none. Default 30000. */
  statementTimeoutMs?: number;
  /** How long opening a connection (and waiting for a free pooled one) may take, ms. Default 10000. */
  connectTimeoutMs?: number;
  /** `application_name` the server shows in `pg_stat_activity`. Default `tokenwatch`. */
  applicationName?: string;
  /** Client-side limit of one statement, ms: past it the statement fails and its connection is dropped. Default `statementTimeoutMs` + 5000. */
  queryTimeoutMs?: number;
  /** Called with an error of a pooled connection, idle or in use (e.g. the server restarted); the pool replaces it. */
  onIdleError?: (err: StoreError) => void;
}

/** Defaults of {@link PostgresOptions}. */
export const POSTGRES_DEFAULTS = {
  port: 5432,
  sslmode: 'verify-full',
  poolSize: 10,
  statementTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
} as const satisfies Partial<PostgresOptions>;

/** A {@link StoreError} of the PostgreSQL backend, with the server's SQLSTATE when it sent one (e.g. `23505` unique violation, `57014` statement timeout). */
export class PostgresStoreError extends StoreError {
  /** Five-character SQLSTATE (https://www.postgresql.org/docs/current/errcodes-appendix.html), when the server sent one. */
  readonly sqlState: string | undefined;
  /** Name of the violated constraint, for integrity errors. */
  readonly constraint: string | undefined;
  constructor(message: string, sqlState?: string, constraint?: string) {
    super(message);
    this.name = 'PostgresStoreError';
    this.sqlState = sqlState;
    this.constraint = constraint;
  }
}

/** SQLSTATE of a statement cancelled by `statement_timeout` (query_canceled). */
export const QUERY_CANCELED = '57014';

/**
 * Rewrites positional `?` placeholders to `$1`, `$2`, … in order, leaving `?` alone inside single-quoted literals
 * (with `''` escapes; also `E'…'` with backslash escapes), double-quoted identifiers, `--` and `/* *\/` comments, and
 * dollar-quoted text (`$tag$…$tag$`).
 */
export function numberPlaceholders(sql: string): string {
  return replacePlaceholders(sql, (n) => `$${n}`);
}

/** `sql` with its n-th positional `?` (1-based, outside quoted text and comments) replaced by `to(n)`. */
function replacePlaceholders(sql: string, to: (n: number) => string): string {
  let out = '';
  let n = 0;
  let i = 0;
  const len = sql.length;
  while (i < len) {
    const c = sql[i]!;
    if (c === '?') {
      out += to(++n);
      i++;
      continue;
    }
    let end = i + 1;
    if (c === "'") {
      const backslash = i > 0 && /[eE]/.test(sql[i - 1]!) && (i < 2 || !/\w/.test(sql[i - 2]!));
      while (end < len) {
        if (backslash && sql[end] === '\\') end += 2;
        else if (sql[end] === "'") {
          if (sql[end + 1] === "'") end += 2;
          else {
            end++;
            break;
          }
        } else end++;
      }
    } else if (c === '"') {
      while (end < len && sql[end] !== '"') end++;
      end = Math.min(len, end + 1);
    } else if (c === '-' && sql[i + 1] === '-') {
      while (end < len && sql[end] !== '\n') end++;
    } else if (c === '/' && sql[i + 1] === '*') {
      const close = sql.indexOf('*/', i + 2);
      end = close < 0 ? len : close + 2;
    } else if (c === '$' && (i === 0 || !/\w/.test(sql[i - 1]!))) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))?.[0];
      if (tag !== undefined) {
        const close = sql.indexOf(tag, i + tag.length);
        end = close < 0 ? len : close + tag.length;
      }
    }
    out += sql.slice(i, end);
    i = end;
  }
  return out;
}

/** Most statements {@link runManyOn} sends in one simple query (bounds the text of one round trip). */
const RUN_MANY_CHUNK = 500;

/**
 * One parameter as an SQL literal, for {@link runManyOn}: strings through `pg`'s `escapeLiteral` (quotes and
 * backslashes escaped, `E'…'` when needed), finite numbers and bigints as numerals, null and undefined as `NULL`,
 * booleans as `TRUE`/`FALSE`.
 * @throws {PostgresStoreError} for any other value (objects, buffers, non-finite numbers), naming only its type
 */
function literal(v: unknown, sql: string, where: string): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'string') return pg.escapeLiteral(v);
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  throw new PostgresStoreError(`PostgreSQL store (${where}) in "${statementStart(sql)}": runMany cannot send a parameter of type ${typeof v}`);
}

/**
 * {@link SqlExecutor.runMany} on one client inside a transaction: the rows' statements, their parameters inlined
 * as literals ({@link literal}), joined into one multi-statement simple query per {@link RUN_MANY_CHUNK} rows — one
 * round trip each, run by the server one after the other in the transaction, with one result (row count) per
 * statement (PostgreSQL docs `protocol-flow.html#PROTOCOL-FLOW-MULTI-STATEMENT`; node-postgres returns an array of
 * results for a multi-statement text).
 */
async function runManyOn(client: pg.PoolClient, sql: string, rows: readonly SqlParams[], where: string): Promise<number[]> {
  const changes: number[] = [];
  for (let from = 0; from < rows.length; from += RUN_MANY_CHUNK) {
    const chunk = rows.slice(from, from + RUN_MANY_CHUNK);
    const text = chunk.map((params) => replacePlaceholders(sql, (n) => literal(params[n - 1], sql, where))).join(';\n');
    let result: pg.QueryResult | pg.QueryResult[];
    try {
      result = (await client.query(text)) as pg.QueryResult | pg.QueryResult[];
    } catch (err) {
      throw wrap(err, sql, where);
    }
    for (const r of Array.isArray(result) ? result : [result]) changes.push(r.rowCount ?? 0);
  }
  return changes;
}

/** The statement's first words (at most 60 characters) for error messages: names what failed, never its data. */
export function statementStart(sql: string): string {
  const flat = sql.replace(/\s+/g, ' ').trim();
  return flat.length <= 60 ? flat : `${flat.slice(0, 57)}...`;
}

/** What an error message may say about a pg error: the message, unless it may quote a value (class 22, data exception). */
function describePgError(err: unknown): { text: string; sqlState?: string; constraint?: string } {
  const e = err as { code?: unknown; message?: unknown; constraint?: unknown; severity?: unknown };
  const sqlState = typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string' ? e.code : undefined;
  const constraint = typeof e.constraint === 'string' ? e.constraint : undefined;
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : String(err);
  if (sqlState === undefined) {
    // A client-side failure (connection refused, TLS, timeout): Node's system error code says most.
    const code = typeof e.code === 'string' ? ` (${e.code})` : '';
    return { text: `${message}${code}` };
  }
  if (sqlState.startsWith('22')) return { text: `a value does not fit its column (data exception, SQLSTATE ${sqlState})`, sqlState, constraint };
  if (sqlState === QUERY_CANCELED) return { text: `${message} (SQLSTATE ${sqlState}; store.postgres.statementTimeout)`, sqlState, constraint };
  return { text: `${message} (SQLSTATE ${sqlState})`, sqlState, constraint };
}

/** Wraps a failure of `sql` as a {@link PostgresStoreError}; the original is not kept as `cause` (its detail may quote values). */
function wrap(err: unknown, sql: string | undefined, where: string): PostgresStoreError {
  if (err instanceof PostgresStoreError) return err;
  if (err instanceof StoreError) return new PostgresStoreError(err.message);
  const { text, sqlState, constraint } = describePgError(err);
  const what = sql === undefined ? '' : ` in "${statementStart(sql)}"`;
  return new PostgresStoreError(`PostgreSQL store (${where})${what}: ${text}`, sqlState, constraint);
}

/** Reads the password from its source. @throws {StoreError} naming the source (never the value) when unset or unreadable */
export function readPassword(source: PasswordSource): string {
  if ('env' in source) {
    const value = process.env[source.env];
    if (value === undefined || value === '') throw new StoreError(`PostgreSQL password: environment variable ${source.env} is not set (store.postgres.passwordFrom.env)`);
    return value;
  }
  let text: string;
  try {
    text = readFileSync(source.file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new StoreError(`PostgreSQL password: cannot read ${source.file} (${code}; store.postgres.passwordFrom.file)`);
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new StoreError(`PostgreSQL password: ${source.file} is empty (store.postgres.passwordFrom.file)`);
  return value;
}

/** The `ssl` option of `pg` for a mode (node-postgres docs "SSL"; Node `tls.connect` options). */
function sslOptions(mode: PostgresSslMode, caFile: string | undefined): false | pg.ConnectionConfig['ssl'] {
  if (mode === 'disable') return false;
  if (mode === 'require') return { rejectUnauthorized: false };
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch (err) {
      throw new StoreError(`PostgreSQL store: cannot read the CA file ${caFile} (${(err as NodeJS.ErrnoException).code ?? 'error'}; store.postgres.caFile)`);
    }
  }
  const base = { rejectUnauthorized: true, ...(ca !== undefined ? { ca } : {}) };
  // verify-ca: the chain is checked, the name is not (libpq's meaning).
  return mode === 'verify-ca' ? { ...base, checkServerIdentity: () => undefined } : base;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** This pool's type parsers: int8 and numeric as numbers, everything else as `pg` does by default. */
const TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => (value === null ? null : Number(value));
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as unknown as pg.CustomTypesConfig;

/**
 * A `pg.Client` that closes its socket when connecting fails. pg-pool 3 drops a client that failed to connect without
 * ending it, so a failure on our side of the handshake (the password source unreadable, a certificate refused)
 * would leave the socket open and the server's backend waiting in authentication until `authentication_timeout`.
 */
class ClosingClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
  override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | undefined {
    if (callback === undefined) return super.connect();
    const done = callback as (err: Error | null, c?: pg.Client) => void;
    super.connect((err: Error | null) => {
      if (err) (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      done(err, this);
    });
    return undefined;
  }
}

/** Anything with pg's `query`: the pool or one checked-out client. */
interface Queryable {
  query(text: string, values?: unknown[]): Promise<pg.QueryResult>;
}

const placeholderCache = new Map<string, string>();
const CACHE_LIMIT = 2000;

function toPg(sql: string): string {
  let text = placeholderCache.get(sql);
  if (text === undefined) {
    text = numberPlaceholders(sql);
    if (placeholderCache.size >= CACHE_LIMIT) placeholderCache.clear();
    placeholderCache.set(sql, text);
  }
  return text;
}

/** Runs one statement on `q`, wrapping failures. */
async function query(q: Queryable, sql: string, params: SqlParams | undefined, where: string): Promise<pg.QueryResult> {
  try {
    return await q.query(toPg(sql), params === undefined ? undefined : [...params]);
  } catch (err) {
    throw wrap(err, sql, where);
  }
}

/** The executor of one transaction, on one checked-out client; `depth` counts savepoints. */
class TxExecutor implements SqlExecutor {
  readonly dialect = 'postgres' as const;
  private ended = false;
  private savepoints = 0;
  constructor(
    private readonly client: pg.PoolClient,
    private readonly where: string,
  ) {}

  private check(): void {
    if (this.ended) throw new PostgresStoreError(`PostgreSQL store (${this.where}): statement on a transaction that has ended`);
  }
  end(): void {
    this.ended = true;
  }
  async all<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T[]> {
    this.check();
    return (await query(this.client, sql, params, this.where)).rows as T[];
  }
  async get<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T | undefined> {
    this.check();
    return (await query(this.client, sql, params, this.where)).rows[0] as T | undefined;
  }
  async run(sql: string, params?: SqlParams): Promise<SqlRunResult> {
    this.check();
    return { changes: (await query(this.client, sql, params, this.where)).rowCount ?? 0 };
  }
  async runMany(sql: string, rows: readonly SqlParams[]): Promise<number[]> {
    this.check();
    return runManyOn(this.client, sql, rows, this.where);
  }
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.check();
    const name = `tw_sp_${++this.savepoints}`;
    await query(this.client, `SAVEPOINT ${name}`, undefined, this.where);
    let result: T;
    try {
      result = await fn(this);
    } catch (err) {
      await query(this.client, `ROLLBACK TO SAVEPOINT ${name}`, undefined, this.where);
      throw err;
    }
    await query(this.client, `RELEASE SAVEPOINT ${name}`, undefined, this.where);
    return result;
  }
  async lock(key: string): Promise<void> {
    this.check();
    await query(this.client, 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [key], this.where);
  }
  async close(): Promise<void> {
    // The pool owns the connection; closing a transaction's executor is a no-op.
  }
}

/** The pooled PostgreSQL executor returned by {@link openPostgres}. */
export class PostgresExecutor implements SqlExecutor {
  readonly dialect = 'postgres' as const;
  private closed = false;
  private readonly where: string;
  /** The `pg.Pool` (exposed for tests and the health check: `totalCount`, `idleCount`, `waitingCount`). */
  readonly pool: pg.Pool;

  constructor(opts: PostgresOptions) {
    const port = opts.port ?? POSTGRES_DEFAULTS.port;
    this.where = describePostgres(opts);
    const statementTimeout = opts.statementTimeoutMs ?? POSTGRES_DEFAULTS.statementTimeoutMs;
    const source = opts.passwordFrom;
    const fixed = opts.password;
    const config: pg.PoolConfig = {
      host: opts.host,
      port,
      database: opts.database,
      user: opts.user,
      // Called by pg for every new connection (pg/lib/client.js), so a rotated password is picked up.
      ...(source !== undefined ? { password: async () => readPassword(source) } : fixed !== undefined ? { password: fixed } : {}),
      ssl: sslOptions(opts.sslmode ?? POSTGRES_DEFAULTS.sslmode, opts.caFile),
      max: opts.poolSize ?? POSTGRES_DEFAULTS.poolSize,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? POSTGRES_DEFAULTS.connectTimeoutMs,
      application_name: opts.applicationName ?? 'tokenwatch',
      types: TYPES,
      Client: ClosingClient,
      ...(statementTimeout > 0
        ? { statement_timeout: statementTimeout, idle_in_transaction_session_timeout: Math.max(60_000, 2 * statementTimeout) }
        : {}),
      query_timeout: opts.queryTimeoutMs ?? (statementTimeout > 0 ? statementTimeout + 5_000 : 0),
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
    };
    this.pool = new pg.Pool(config);
    const report = (err: Error) => opts.onIdleError?.(wrap(err, undefined, this.where));
    // An idle client's error (server restart, network cut) is emitted on the pool; unhandled it would crash the process.
    this.pool.on('error', report);
    // A checked-out client's error is emitted on the client only (pg-pool listens while it is idle): a listener for
    // its whole life, so a terminated backend during a statement fails that statement instead of the process.
    this.pool.on('connect', (client) => client.on('error', report));
  }

  private check(): void {
    if (this.closed) throw new PostgresStoreError(`PostgreSQL store (${this.where}): the store is closed`);
  }
  async all<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T[]> {
    this.check();
    return (await query(this.pool, sql, params, this.where)).rows as T[];
  }
  async get<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T | undefined> {
    this.check();
    return (await query(this.pool, sql, params, this.where)).rows[0] as T | undefined;
  }
  async run(sql: string, params?: SqlParams): Promise<SqlRunResult> {
    this.check();
    return { changes: (await query(this.pool, sql, params, this.where)).rowCount ?? 0 };
  }
  async runMany(sql: string, rows: readonly SqlParams[]): Promise<number[]> {
    this.check();
    if (rows.length === 0) return [];
    // All rows or none: in one transaction of their own.
    return this.transaction((tx) => tx.runMany(sql, rows));
  }
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.check();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw wrap(err, undefined, this.where);
    }
    const tx = new TxExecutor(client, this.where);
    let broken: Error | undefined;
    try {
      await query(client, 'BEGIN', undefined, this.where);
      let result: T;
      try {
        result = await fn(tx);
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackErr) {
          // The connection is unusable: destroy it rather than return it to the pool.
          broken = rollbackErr as Error;
        }
        throw err;
      }
      await query(client, 'COMMIT', undefined, this.where);
      return result;
    } catch (err) {
      broken ??= err instanceof PostgresStoreError && err.sqlState === undefined ? err : undefined;
      throw err;
    } finally {
      tx.end();
      client.release(broken);
    }
  }
  async lock(_key: string): Promise<void> {
    throw new PostgresStoreError(`PostgreSQL store (${this.where}): lock() outside a transaction; call it on the executor transaction() gives`);
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

/**
 * Opens a pool to a PostgreSQL server. Connecting is lazy: the first statement opens the first connection (so a
 * wrong host or password surfaces there, as a {@link PostgresStoreError}).
 * @throws {StoreError} when `caFile` cannot be read
 */
export function openPostgres(opts: PostgresOptions): PostgresExecutor {
  return new PostgresExecutor(opts);
}

/** `store.postgres` of the effective config (src/config/schema.ts; durations in ms) as {@link PostgresOptions}. */
export function postgresOptionsOf(pg: NonNullable<Config['store']['postgres']>): PostgresOptions {
  return {
    host: pg.host,
    port: pg.port,
    database: pg.database,
    user: pg.user,
    ...(pg.passwordFrom !== undefined ? { passwordFrom: pg.passwordFrom } : {}),
    sslmode: pg.sslmode,
    ...(pg.caFile !== undefined ? { caFile: pg.caFile } : {}),
    poolSize: pg.poolSize,
    statementTimeoutMs: pg.statementTimeout,
    connectTimeoutMs: pg.connectTimeout,
    queryTimeoutMs: pg.queryTimeout,
  };
}

/** `user@host:port/database` of a connection (no password), for messages. */
export function describePostgres(opts: Pick<PostgresOptions, 'user' | 'host' | 'port' | 'database'>): string {
  return `${opts.user}@${opts.host}:${opts.port ?? POSTGRES_DEFAULTS.port}/${opts.database}`;
}
