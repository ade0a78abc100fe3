/**
 * The types of the validated, effective configuration of `tokenwatch serve`. They are inferred from the zod schema
 * of the file (`z.output<typeof fileSchema>`, src/config/schema.ts), where each field is documented, so the shape is
 * written once; this module keeps the names importable from where they always were.
 */
export type { AuditSourceConfig, AzureAuditConfig, ClusterConfig, Config } from './schema.js';
