/** Approval policy and the pure approval state machine. */
export * from './machine.js';
export * from './policy.js';
