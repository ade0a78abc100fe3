/**
 * Long tasks in a V8 CPU profile (`.cpuprofile`, the `Profiler.stop` result of the inspector protocol,
 * https://chromedevtools.github.io/devtools-protocol/v8/Profiler/#type-Profile): the stretches in which the event loop
 * ran without a break (consecutive samples none of which is `(idle)`), and, over the stretches longer than a
 * threshold, where their time went — by the function on top of the stack (self time) and by the deepest frame of the
 * project's own code (`/src/` in the script URL; "outside src" when none is on the stack).
 *
 * `npx tsx bench/long-tasks.ts <file.cpuprofile> [--over 50]` prints it; `bench/fleet.ts --profile` calls
 * {@link longTasks} on serve's profile of the measured window. Times are ms.
 */
import { readFileSync } from 'node:fs';

/** The parts of a V8 CPU profile read here. */
export interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  /** µs. */
  startTime: number;
  /** µs. */
  endTime: number;
  /** The node id of each sample. */
  samples: number[];
  /** µs since the previous sample (the first: since `startTime`). */
  timeDeltas: number[];
}

/** One attribution row: a frame and the ms of long-task time spent in it. */
export interface Share {
  frame: string;
  ms: number;
}

/** What {@link longTasks} finds. */
export interface LongTasks {
  /** ms the profile covers. */
  profiledMs: number;
  /** ms not idle. */
  busyMs: number;
  /** The stretches longer than the threshold. */
  count: number;
  /** Their total, ms. */
  totalMs: number;
  /** The longest stretch, ms. */
  longestMs: number;
  /** Top frames by self time inside those stretches. */
  bySelf: Share[];
  /** Top frames of the project's own code (deepest `/src/` frame of each sample) inside those stretches. */
  bySrc: Share[];
}

const frameName = (f: { functionName: string; url: string; lineNumber: number }): string => {
  const url = f.url.replace(/^file:\/\//, '');
  const at = url.lastIndexOf('/node_modules/');
  const short = at >= 0 ? url.slice(at + 1) : url.includes('/src/') ? url.slice(url.lastIndexOf('/src/') + 1) : url.split('/').slice(-2).join('/');
  return `${f.functionName || '(anonymous)'}${short ? ` ${short}:${f.lineNumber + 1}` : ''}`;
};

/** Long tasks of `profile`: stretches of busy samples longer than `overMs` (default 50), top `top` frames (default 12). */
export function longTasks(profile: CpuProfile, overMs = 50, top = 12): LongTasks {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const srcOf = new Map<number, string>();
  const deepestSrc = (id: number): string => {
    const known = srcOf.get(id);
    if (known !== undefined) return known;
    let name = 'outside src';
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (f.url.includes('/src/') && !f.url.includes('/node_modules/')) {
        name = frameName(f);
        break;
      }
    }
    srcOf.set(id, name);
    return name;
  };
  const self = new Map<string, number>();
  const src = new Map<string, number>();
  let busyMs = 0;
  let count = 0;
  let totalMs = 0;
  let longestMs = 0;
  let run: Array<{ id: number; ms: number }> = [];
  let runMs = 0;
  const close = (): void => {
    if (runMs > overMs) {
      count++;
      totalMs += runMs;
      longestMs = Math.max(longestMs, runMs);
      for (const s of run) {
        const f = frameName(byId.get(s.id)!.callFrame);
        self.set(f, (self.get(f) ?? 0) + s.ms);
        const d = deepestSrc(s.id);
        src.set(d, (src.get(d) ?? 0) + s.ms);
      }
    }
    run = [];
    runMs = 0;
  };
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    // A sample stands for the time until the next one.
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    if (byId.get(id)?.callFrame.functionName === '(idle)') {
      close();
      continue;
    }
    busyMs += ms;
    run.push({ id, ms });
    runMs += ms;
  }
  close();
  const rank = (m: Map<string, number>): Share[] =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([frame, ms]) => ({ frame, ms }));
  return { profiledMs: (profile.endTime - profile.startTime) / 1000, busyMs, count, totalMs, longestMs, bySelf: rank(self), bySrc: rank(src) };
}

/** The report {@link longTasks} prints, as lines. */
export function formatLongTasks(t: LongTasks, overMs = 50): string[] {
  const pct = (ms: number) => `${((100 * ms) / Math.max(1, t.totalMs)).toFixed(0).padStart(3)} %`;
  return [
    `profile ${(t.profiledMs / 1000).toFixed(1)} s, busy ${(t.busyMs / 1000).toFixed(1)} s; ${t.count} stretches > ${overMs} ms without an idle sample, ${(t.totalMs / 1000).toFixed(1)} s in all, longest ${t.longestMs.toFixed(0)} ms`,
    '  by self time:',
    ...t.bySelf.map((s) => `    ${pct(s.ms)}  ${s.ms.toFixed(0).padStart(6)} ms  ${s.frame}`),
    '  by deepest src/ frame:',
    ...t.bySrc.map((s) => `    ${pct(s.ms)}  ${s.ms.toFixed(0).padStart(6)} ms  ${s.frame}`),
  ];
}

if (process.argv[1]?.endsWith('long-tasks.ts')) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: npx tsx bench/long-tasks.ts <file.cpuprofile> [--over 50]\n');
    process.exit(2);
  }
  const i = process.argv.indexOf('--over');
  const over = i > 0 ? Number(process.argv[i + 1]) : 50;
  const t = longTasks(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, over, 25);
  process.stdout.write(`${formatLongTasks(t, over).join('\n')}\n`);
}
