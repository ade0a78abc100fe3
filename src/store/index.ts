/** The durable store of `tokenwatch serve` (embedded SQLite or PostgreSQL). See `types.ts` for the row types and the {@link Store} interface. */
export * from './types.js';
export { openConfiguredStore, openStore, newApprovalId } from './db.js';
