/**
 * A small parser of the Prometheus text exposition format (version 0.0.4), enough for `kube-apiserver`'s `/metrics`.
 *
 * Why not an npm package: the only parser in the registry list (`parse-prometheus-text-format` 1.1.1) has had no
 * release for years and ships no types; tokenwatch needs samples of a handful of label-less counters, which this
 * ~100-line parser covers with line-numbered errors.
 *
 * Format (prometheus/docs `content/docs/instrumenting/exposition_formats.md`): one sample per line,
 * `name{label="value",…} value [timestamp_ms]`; `#` lines are comments (`# HELP`, `# TYPE`); label values escape
 * `\\`, `\"` and `\n`; values are Go floats (`1`, `1.5e+09`, `+Inf`, `-Inf`, `NaN`). Pure, no I/O.
 */

/** One sample line. */
export interface PromSample {
  /** Metric name, e.g. `serviceaccount_stale_tokens_total`. */
  name: string;
  /** Labels as written (empty object for none). */
  labels: Record<string, string>;
  value: number;
  /** Optional timestamp of the sample, epoch ms (as the format defines it). */
  timestampMs?: number;
}

/** The result of {@link parsePrometheusText}. */
export interface PromParseResult {
  samples: PromSample[];
  /** `# TYPE` declarations: metric family name → `counter | gauge | histogram | summary | untyped`. */
  types: Record<string, string>;
  /** Lines that were neither comments nor valid samples (1-based line numbers, at most 20 kept). */
  malformedLines: number[];
  /** How many lines were malformed in all. */
  malformed: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** Parses a Go float as Prometheus writes it; NaN for anything else is reported by returning undefined. */
function parseValue(s: string): number | undefined {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return undefined;
  return Number(s);
}

/** Parses `{a="x",b="y"}` starting at `line[i] === '{'`; returns the labels and the index after `}`. */
function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } | undefined {
  const labels: Record<string, string> = {};
  let i = start + 1;
  for (;;) {
    while (line[i] === ' ' || line[i] === '\t') i++;
    if (line[i] === '}') return { labels, end: i + 1 };
    const m = LABEL_NAME.exec(line.slice(i));
    if (!m) return undefined;
    const name = m[0];
    i += name.length;
    while (line[i] === ' ') i++;
    if (line[i] !== '=') return undefined;
    i++;
    while (line[i] === ' ') i++;
    if (line[i] !== '"') return undefined;
    i++;
    let value = '';
    for (;;) {
      const c = line[i];
      if (c === undefined) return undefined;
      if (c === '\\') {
        const n = line[i + 1];
        value += n === 'n' ? '\n' : n === '"' ? '"' : n === '\\' ? '\\' : `\\${n ?? ''}`;
        i += 2;
        continue;
      }
      if (c === '"') {
        i++;
        break;
      }
      value += c;
      i++;
    }
    labels[name] = value;
    while (line[i] === ' ') i++;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') return undefined;
  }
}

/** Parses one sample line; undefined when malformed. */
function parseSample(line: string): PromSample | undefined {
  const m = NAME.exec(line);
  if (!m) return undefined;
  const name = m[0];
  let i = name.length;
  let labels: Record<string, string> = {};
  if (line[i] === '{') {
    const l = parseLabels(line, i);
    if (!l) return undefined;
    labels = l.labels;
    i = l.end;
  }
  const rest = line.slice(i).trim().split(/[ \t]+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === '') return undefined;
  const value = parseValue(rest[0]!);
  if (value === undefined) return undefined;
  const sample: PromSample = { name, labels, value };
  if (rest.length === 2) {
    if (!/^-?\d+$/.test(rest[1]!)) return undefined;
    sample.timestampMs = Number(rest[1]);
  }
  return sample;
}

/**
 * Parses Prometheus text. Never throws: malformed lines are counted and skipped (callers decide whether a text
 * without the samples they need is an error).
 */
export function parsePrometheusText(text: string): PromParseResult {
  const result: PromParseResult = { samples: [], types: {}, malformedLines: [], malformed: 0 };
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, idx) => {
    const line = raw.trim();
    if (line === '') return;
    if (line.startsWith('#')) {
      const t = /^#\s*TYPE\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s+(\w+)\s*$/.exec(line);
      if (t) result.types[t[1]!] = t[2]!;
      return;
    }
    const s = parseSample(line);
    if (s) result.samples.push(s);
    else {
      result.malformed++;
      if (result.malformedLines.length < 20) result.malformedLines.push(idx + 1);
    }
  });
  return result;
}
