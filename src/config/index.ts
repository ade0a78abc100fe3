/** Configuration of `tokenwatch serve`: load, validate, mask, render. See `config.example.yaml`. */
export * from './types.js';
export { parseConfig } from './schema.js';
