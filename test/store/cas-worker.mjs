// Worker for test/store/approvals.test.ts: opens its own connection to the store (the test bundles
// src/store/db.ts to plain JS with esbuild first, so threads start fast), waits for the shared start flag,
// then tries one compare-and-set transition and reports whether it won.
import { parentPort, workerData } from 'node:worker_threads';

const { openStore } = await import(workerData.storeModule);
const store = await openStore(workerData.path);
const flag = new Int32Array(workerData.flag);
parentPort.postMessage({ ready: true });
Atomics.wait(flag, 0, 0);
const won = await store.approvals.transition(workerData.id, 'approved', 'running', { state: 'running' }, workerData.at);
await store.close();
parentPort.postMessage({ won });
