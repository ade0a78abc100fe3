/** Configuration of `tokenwatch serve`: load, validate, mask, render. See `config.example.yaml`. */
export * from './types.js';
export { ConfigError, ENV, parseConfig, crossFieldIssues, fileSchema, type ConfigIssue, type FileConfig } from './schema.js';
export { loadConfig, resolveConfigPath } from './load.js';
export { maskConfig, maskSecret, renderEffectiveConfig, toFileForm } from './render.js';
export { parseDuration, formatDuration, DurationError } from './duration.js';
export { approvalPolicyFor } from './policy.js';
