/**
 * Loading the configuration file: path resolution (`--config` / `TOKENWATCH_CONFIG`), YAML parsing with
 * resource limits, validation ({@link parseConfig}) and line numbers for every problem.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, parseDocument, isMap, isNode, isScalar, isSeq, type Document } from 'yaml';
import { ConfigError, ENV, parseConfig, type ConfigIssue } from './schema.js';
import type { Config } from './types.js';
import { runtimeIssues } from './runtime-check.js';

/** yaml's default alias limit; a "billion laughs" document fails instead of exhausting memory. */
const MAX_ALIAS_COUNT = 100;
/** A config file is small; refuse anything larger than this (bytes): 1 MiB. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
const MAX_FILE_BYTES = MAX_CONFIG_FILE_BYTES;

/**
 * Reads at most `maxBytes + 1` bytes of a file, sequentially from its start, whatever it is (regular file, pipe,
 * process substitution `<(…)`, `/dev/zero`, `/dev/stdin`): the size is never trusted beforehand (pipes have none,
 * and a file may grow while read).
 *
 * @returns the bytes read and whether the file holds more than `maxBytes` (then `bytes` is cut at `maxBytes + 1`).
 * @throws the `fs` error (with its `code`) when the file cannot be opened or read.
 */
export function readFileCapped(path: string, maxBytes: number): { bytes: Buffer; tooLarge: boolean } {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    while (n < buf.length) {
      const r = readSync(fd, buf, n, buf.length - n, null);
      if (r === 0) break;
      n += r;
    }
    return { bytes: buf.subarray(0, Math.min(n, maxBytes)), tooLarge: n > maxBytes };
  } finally {
    closeSync(fd);
  }
}

/**
 * The config file path: the `--config` flag, else env `TOKENWATCH_CONFIG`.
 * @throws {ConfigError} when neither is set
 */
export function resolveConfigPath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag !== undefined && flag !== '') return flag;
  const fromEnv = env[ENV.configPath];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  throw new ConfigError([{ path: ['--config'], message: `required: pass --config FILE or set ${ENV.configPath}` }]);
}

/**
 * 1-based line of the key at `path` (for a map entry) or of the node there; when the path does not exist in
 * the file (a missing field), the line of its nearest existing ancestor.
 */
function lineOf(doc: Document, counter: LineCounter, path: (string | number)[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const parent: unknown = n <= 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true);
    if (n === 0) return isNode(parent) && parent.range ? counter.linePos(parent.range[0]).line : undefined;
    const last = path[n - 1];
    if (isMap(parent)) {
      const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === last);
      if (pair !== undefined && isNode(pair.key) && pair.key.range) return counter.linePos(pair.key.range[0]).line;
    } else if (isSeq(parent) && typeof last === 'number') {
      const item: unknown = parent.items[last];
      if (isNode(item) && item.range) return counter.linePos(item.range[0]).line;
    }
  }
  return undefined;
}

/**
 * File-system checks of `store.path` that the schema cannot make: it must not be an existing directory (SQLite
 * would fail at start with "unable to open database file", far from the setting that caused it).
 * @returns the problems (empty when the path is usable or does not exist yet; its directory is created at start)
 */
function storePathIssues(path: string): ConfigIssue[] {
  let isDirectory = false;
  try {
    isDirectory = statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch {
    // Unreadable parent and the like: openStore reports it with the SQLite error and an access hint.
  }
  if (!isDirectory) return [];
  return [{ path: ['store', 'path'], message: `${path} is a directory; give the database file inside it (e.g. ${join(path, 'tokenwatch.db')})` }];
}

/**
 * Reads, parses and validates a YAML config file. Secrets come from `env`, never from the file.
 * @param path config file (relative to the working directory)
 * @param env environment (injected for tests, as probot's `readEnvOptions(env = process.env)`)
 * @returns the effective configuration, defaults filled
 * @throws {ConfigError} unreadable file, a file over 1 MiB (only 1 MiB + 1 byte is ever read, so pipes such as
 *   `--config <(envsubst < t.yaml)` work and `/dev/zero` is refused at once), YAML syntax errors (all of them),
 *   or every invalid field at once, each with its path and line (plus `store.path` naming an existing directory; with
 *   `runtime`, every referenced file that cannot be read and every named environment variable that is unset:
 *   src/config/runtime-check.ts)
 * @param opts.runtime also run the runtime checks (`config check --runtime`, `serve`); default false, so a
 *   workstation can check a pod's config
 */
export function loadConfig(path: string, env: NodeJS.ProcessEnv = process.env, opts: { runtime?: boolean } = {}): Config {
  let text: string;
  try {
    // At most 1 MiB + 1 byte is ever read, so `--config /dev/zero` or a huge file is refused at once.
    const { bytes, tooLarge } = readFileCapped(path, MAX_FILE_BYTES);
    if (tooLarge) {
      throw new ConfigError(
        [{ path: [], message: `file is larger than ${MAX_FILE_BYTES} bytes (1 MiB); a config file is a few KiB` }],
        path,
      );
    }
    text = bytes.toString('utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError([{ path: [], message: `cannot read config file: ${code ?? (err as Error).message}` }], path);
  }

  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({
        path: [],
        message: `YAML ${e.code}: ${(e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')}`,
        ...(e.linePos?.[0] ? { line: e.linePos[0].line } : {}),
      })),
      path,
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    throw new ConfigError([{ path: [], message: `YAML: ${(err as Error).message}` }], path);
  }

  try {
    const config = parseConfig(raw, env);
    const fsIssues = [...storePathIssues(config.store.path), ...(opts.runtime ? runtimeIssues(config, env) : [])];
    if (fsIssues.length > 0) throw new ConfigError(fsIssues);
    return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const located: ConfigIssue[] = err.issues.map((i) => {
      if (i.path[0] === 'env') return i;
      const line = lineOf(doc, counter, i.path);
      return line === undefined ? i : { ...i, line };
    });
    throw new ConfigError(located, path);
  }
}
