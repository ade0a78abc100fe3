/** Pure Block Kit builders of tokenwatch's Slack messages, and the Block Kit limit validator. */
export * from './text.js';
export * from './limits.js';
export * from './ids.js';
export * from './finding.js';
export * from './alert.js';
export * from './approval.js';
export * from './progress.js';
export * from './status.js';
export * from './misc.js';
export * from './refusal.js';
export * from './digest.js';
