// Entry of the parallel scan's worker threads when tokenwatch runs from its TypeScript sources (vitest, or
// bin/tokenwatch.js without dist/): registers tsx in this thread, then loads worker.ts. The compiled build starts
// dist/cli/worker.js directly and never uses this file. See src/scan/parallel.ts, `workerEntry`.
import { register } from 'tsx/esm/api';

register();
await import(new URL('./worker.ts', import.meta.url).href);
