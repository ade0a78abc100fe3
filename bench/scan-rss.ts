/**
 * Fallback peak-RSS probe for `npm run bench` when `/usr/bin/time` is absent: runs the scan
 * pipeline in this process (worker threads included: they share its RSS) over the files given after
 * the worker count, then prints `process.resourceUsage().maxRSS` (kilobytes) on stdout.
 *
 * Usage: `tsx bench/scan-rss.ts JOBS FILE...`
 */
import { runScan } from '../src/scan/run.js';

const [jobs, ...files] = process.argv.slice(2);
if (!jobs || !(Number(jobs) >= 1) || files.length === 0) {
  process.stderr.write('usage: tsx bench/scan-rss.ts JOBS FILE...\n');
  process.exit(2);
}
await runScan({ files, cluster: 'bench', maxTokenAge: { mode: 'eks' }, jobs: Number(jobs) });
process.stdout.write(`${process.resourceUsage().maxRSS}\n`);
