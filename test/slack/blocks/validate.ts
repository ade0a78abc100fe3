/**
 * The tests' check of a whole Slack message against Block Kit's limits: the product checks blocks
 * (`validateBlocks`, src/slack/blocks/limits.ts); a message also needs its fallback `text`.
 */
import { LIMITS, validateBlocks } from '../../../src/slack/blocks/limits.js';

/** Violations of a whole message: `text` present (the fallback) and within limit, plus `validateBlocks`. */
export function validateMessage(msg: { text?: unknown; blocks?: unknown }): string[] {
  const errs: string[] = [];
  if (typeof msg.text !== 'string' || msg.text.trim() === '') errs.push('/text: fallback text is required');
  else if (msg.text.length > LIMITS.messageText) errs.push(`/text: ${msg.text.length} chars > ${LIMITS.messageText}`);
  if (msg.blocks !== undefined) errs.push(...validateBlocks(msg.blocks));
  return errs;
}
