// Entry of the SQLite worker thread when tokenwatch runs from its TypeScript sources (vitest, tsx, or
// bin/tokenwatch.js without dist/): registers tsx in this thread, then loads sqlite-worker.ts. The compiled build
// starts dist/cli/sqlite-worker.js directly and never uses this file. See src/store/sqlite.ts, `sqliteWorkerEntry`.
import { register } from 'tsx/esm/api';

register();
await import(new URL('./sqlite-worker.ts', import.meta.url).href);
