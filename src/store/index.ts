/** The durable SQLite store of `tokenwatch serve`. See `types.ts` for the row types and the {@link Store} interface. */
export * from './types.js';
export { openStore, newApprovalId } from './db.js';
