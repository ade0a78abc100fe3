/**
 * Fallback peak-RSS probe for `npm run bench` when `/usr/bin/time` is absent: runs the scan
 * pipeline in this process over the file given as the only argument, then prints
 * `process.resourceUsage().maxRSS` (kilobytes) on stdout.
 */
import { runScan } from '../src/scan/run.js';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: tsx bench/scan-rss.ts FILE\n');
  process.exit(2);
}
await runScan({ files: [file], cluster: 'bench', maxTokenAge: { mode: 'eks' } });
process.stdout.write(`${process.resourceUsage().maxRSS}\n`);
