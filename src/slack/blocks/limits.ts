/**
 * Block Kit limits and a validator that lists every violation of them.
 *
 * Limits from Slack's Block Kit reference (docs.slack.dev/reference/block-kit/blocks/*, composition objects)
 * and @slack/types `block-kit/*.ts`, summarised in docs/design/stack.md §1. Slack answers a message that breaks
 * them with `invalid_blocks`; the builders never produce one, and the fake Slack Web API
 * (`src/sandbox/fakes/slack.ts`) uses this validator to reject messages the real API would reject.
 */

/** Limits in characters (UTF-16 units, which over-count emoji: conservative) or items. */
export const LIMITS = {
  blocksPerMessage: 50,
  blockId: 255,
  actionId: 255,
  sectionText: 3000,
  sectionFields: 10,
  sectionFieldText: 2000,
  headerText: 150,
  contextElements: 10,
  contextText: 3000,
  actionsElements: 25,
  buttonText: 75,
  buttonValue: 2000,
  buttonUrl: 3000,
  confirmTitle: 100,
  confirmText: 300,
  confirmButton: 30,
  imageUrl: 3000,
  imageAltText: 2000,
  markdownBlock: 12_000,
  /** chat.postMessage `text`: longer text is truncated by Slack (`message_truncated` warning). */
  messageText: 40_000,
  /** Overflow menu: 1 to 5 options (docs.slack.dev/reference/block-kit/block-elements/overflow-menu-element). */
  overflowOptions: 5,
  /** Option object: `text` ≤ 75 chars, `value` ≤ 150 chars (docs.slack.dev/reference/block-kit/composition-objects/option-object). */
  optionText: 75,
  optionValue: 150,
  /** Modal view: `title`, `submit`, `close` ≤ 24 chars, ≤ 100 blocks, `private_metadata` ≤ 3000 chars (docs.slack.dev/reference/views/modal-views). */
  viewTitle: 24,
  viewBlocks: 100,
  viewPrivateMetadata: 3000,
} as const;

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function textOf(v: unknown): string | undefined {
  return isObj(v) && typeof v.text === 'string' ? v.text : undefined;
}

/**
 * Checks a `blocks` array (as sent to chat.postMessage/chat.update) against {@link LIMITS}.
 * @param blocks any JSON value (a non-array is itself a violation).
 * @returns human-readable violations, each starting with a JSON pointer (`/blocks/3/text/text: 3120 chars > 3000`);
 *   empty when valid. Unknown block types are checked only for `type` and `block_id`.
 */
export function validateBlocks(blocks: unknown): string[] {
  const errs: string[] = [];
  if (!Array.isArray(blocks)) return ['/blocks: must be an array'];
  if (blocks.length > LIMITS.blocksPerMessage) {
    errs.push(`/blocks: ${blocks.length} blocks > ${LIMITS.blocksPerMessage}`);
  }
  const blockIds = new Set<string>();
  blocks.forEach((b, i) => {
    const p = `/blocks/${i}`;
    if (!isObj(b) || typeof b.type !== 'string') {
      errs.push(`${p}: must be an object with a string type`);
      return;
    }
    if (b.block_id !== undefined) checkId(errs, `${p}/block_id`, b.block_id, LIMITS.blockId, blockIds, '');
    switch (b.type) {
      case 'header':
        checkText(errs, `${p}/text`, b.text, LIMITS.headerText, ['plain_text']);
        break;
      case 'section': {
        if (b.text === undefined && b.fields === undefined) errs.push(`${p}: section needs text or fields`);
        if (b.text !== undefined) checkText(errs, `${p}/text`, b.text, LIMITS.sectionText);
        if (b.fields !== undefined) {
          if (!Array.isArray(b.fields) || b.fields.length === 0) errs.push(`${p}/fields: must be a non-empty array`);
          else {
            if (b.fields.length > LIMITS.sectionFields) errs.push(`${p}/fields: ${b.fields.length} fields > ${LIMITS.sectionFields}`);
            for (const [j, f] of b.fields.entries()) checkText(errs, `${p}/fields/${j}`, f, LIMITS.sectionFieldText);
          }
        }
        if (b.accessory !== undefined) checkElement(errs, `${p}/accessory`, b.accessory, new Set());
        break;
      }
      case 'context': {
        const elements = checkElementList(errs, p, b.elements, LIMITS.contextElements);
        elements?.forEach((e, j) => {
          if (isObj(e) && e.type === 'image') checkImage(errs, `${p}/elements/${j}`, e);
          else checkText(errs, `${p}/elements/${j}`, e, LIMITS.contextText);
        });
        break;
      }
      case 'actions': {
        const actionIds = new Set<string>();
        for (const [j, e] of (checkElementList(errs, p, b.elements, LIMITS.actionsElements) ?? []).entries()) checkElement(errs, `${p}/elements/${j}`, e, actionIds);
        break;
      }
      case 'divider':
        break;
      case 'image':
        checkImage(errs, p, b);
        if (b.title !== undefined) checkText(errs, `${p}/title`, b.title, 2000, ['plain_text']);
        break;
      case 'markdown':
        if (typeof b.text !== 'string' || b.text.length === 0) errs.push(`${p}/text: must be a non-empty string`);
        else if (b.text.length > LIMITS.markdownBlock) errs.push(`${p}/text: ${b.text.length} chars > ${LIMITS.markdownBlock}`);
        break;
      default:
        break;
    }
  });
  return errs;
}

/**
 * Violations of a modal view (as sent to views.open): type `modal`, `title` / `submit` / `close` plain text within
 * {@link LIMITS.viewTitle}, at most {@link LIMITS.viewBlocks} blocks (each checked as in {@link validateBlocks}, except
 * the 50-block message limit), `private_metadata` within {@link LIMITS.viewPrivateMetadata}.
 */
export function validateView(view: unknown): string[] {
  if (!isObj(view)) return ['/view: must be an object'];
  const errs: string[] = [];
  if (view.type !== 'modal') errs.push('/view/type: must be modal');
  checkText(errs, '/view/title', view.title, LIMITS.viewTitle, ['plain_text']);
  if (view.submit !== undefined) checkText(errs, '/view/submit', view.submit, LIMITS.viewTitle, ['plain_text']);
  if (view.close !== undefined) checkText(errs, '/view/close', view.close, LIMITS.viewTitle, ['plain_text']);
  if (typeof view.private_metadata === 'string' && view.private_metadata.length > LIMITS.viewPrivateMetadata) {
    errs.push(`/view/private_metadata: ${view.private_metadata.length} chars > ${LIMITS.viewPrivateMetadata}`);
  }
  if (!Array.isArray(view.blocks)) errs.push('/view/blocks: must be an array');
  else {
    if (view.blocks.length > LIMITS.viewBlocks) errs.push(`/view/blocks: ${view.blocks.length} blocks > ${LIMITS.viewBlocks}`);
    errs.push(...validateBlocks(view.blocks.slice(0, LIMITS.blocksPerMessage)).map((e) => `/view${e}`));
  }
  return errs;
}

/**
 * Violations of a Home tab view (as sent to views.publish; docs.slack.dev/reference/views/home-tab-views): type
 * `home`, a `blocks` array of at most {@link LIMITS.viewBlocks} blocks (each checked as in {@link validateBlocks},
 * except the 50-block message limit), `private_metadata` within {@link LIMITS.viewPrivateMetadata}, `callback_id`
 * within 255 chars.
 */
export function validateHomeView(view: unknown): string[] {
  if (!isObj(view)) return ['/view: must be an object'];
  const errs: string[] = [];
  if (view.type !== 'home') errs.push('/view/type: must be home');
  if (typeof view.private_metadata === 'string' && view.private_metadata.length > LIMITS.viewPrivateMetadata) {
    errs.push(`/view/private_metadata: ${view.private_metadata.length} chars > ${LIMITS.viewPrivateMetadata}`);
  }
  if (typeof view.callback_id === 'string' && view.callback_id.length > LIMITS.blockId) errs.push(`/view/callback_id: ${view.callback_id.length} chars > ${LIMITS.blockId}`);
  if (!Array.isArray(view.blocks)) errs.push('/view/blocks: must be an array');
  else {
    if (view.blocks.length > LIMITS.viewBlocks) errs.push(`/view/blocks: ${view.blocks.length} blocks > ${LIMITS.viewBlocks}`);
    errs.push(...validateBlocks(view.blocks.slice(0, LIMITS.blocksPerMessage)).map((e) => `/view${e}`));
    for (let i = LIMITS.blocksPerMessage; i < Math.min(view.blocks.length, LIMITS.viewBlocks); i += LIMITS.blocksPerMessage) {
      errs.push(...validateBlocks(view.blocks.slice(i, i + LIMITS.blocksPerMessage)).map((e) => `/view${e.replace(/^\/blocks\/(\d+)/, (_m, n: string) => `/blocks/${Number(n) + i}`)}`));
    }
  }
  return errs;
}

/**
 * The `elements` of a context or actions block at `p`: a non-empty array of at most `max` (Block Kit limits); a
 * violation is added to `errs`. Undefined when it is not a non-empty array (nothing to check inside).
 */
function checkElementList(errs: string[], p: string, elements: unknown, max: number): unknown[] | undefined {
  if (!Array.isArray(elements) || elements.length === 0) {
    errs.push(`${p}/elements: must be a non-empty array`);
    return undefined;
  }
  if (elements.length > max) errs.push(`${p}/elements: ${elements.length} elements > ${max}`);
  return elements;
}

/**
 * A `block_id` or `action_id` at `p`: a non-empty string of at most `max` characters, unique among `seen` (the
 * message's block ids, or one block's action ids: `scope` says which in the error); it is added to `seen`.
 */
function checkId(errs: string[], p: string, id: unknown, max: number, seen: Set<string>, scope: string): void {
  if (typeof id !== 'string' || id.length === 0) {
    errs.push(`${p}: must be a non-empty string`);
    return;
  }
  if (id.length > max) errs.push(`${p}: ${id.length} chars > ${max}`);
  if (seen.has(id)) errs.push(`${p}: duplicate "${id}"${scope}`);
  seen.add(id);
}

function checkText(errs: string[], p: string, t: unknown, max: number, types: string[] = ['plain_text', 'mrkdwn']): void {
  if (!isObj(t) || typeof t.type !== 'string' || !types.includes(t.type)) {
    errs.push(`${p}: must be a text object of type ${types.join(' or ')}`);
    return;
  }
  const s = textOf(t);
  if (s === undefined || s.length === 0) errs.push(`${p}/text: must be a non-empty string`);
  else if (s.length > max) errs.push(`${p}/text: ${s.length} chars > ${max}`);
}

function checkImage(errs: string[], p: string, e: Json): void {
  if (typeof e.image_url === 'string') {
    if (e.image_url.length > LIMITS.imageUrl) errs.push(`${p}/image_url: ${e.image_url.length} chars > ${LIMITS.imageUrl}`);
  } else if (e.slack_file === undefined) errs.push(`${p}: image needs image_url or slack_file`);
  if (typeof e.alt_text !== 'string' || e.alt_text.length === 0) errs.push(`${p}/alt_text: must be a non-empty string`);
  else if (e.alt_text.length > LIMITS.imageAltText) errs.push(`${p}/alt_text: ${e.alt_text.length} chars > ${LIMITS.imageAltText}`);
}

function checkElement(errs: string[], p: string, e: unknown, actionIds: Set<string>): void {
  if (!isObj(e) || typeof e.type !== 'string') {
    errs.push(`${p}: must be an object with a string type`);
    return;
  }
  if (e.action_id !== undefined) checkId(errs, `${p}/action_id`, e.action_id, LIMITS.actionId, actionIds, ' in this block');
  if (e.type === 'image') {
    checkImage(errs, p, e);
    return;
  }
  if (e.type === 'overflow') {
    if (!Array.isArray(e.options) || e.options.length === 0) errs.push(`${p}/options: must be a non-empty array`);
    else {
      if (e.options.length > LIMITS.overflowOptions) errs.push(`${p}/options: ${e.options.length} options > ${LIMITS.overflowOptions}`);
      e.options.forEach((o, j) => {
        const op = `${p}/options/${j}`;
        if (!isObj(o)) {
          errs.push(`${op}: must be an object`);
          return;
        }
        checkText(errs, `${op}/text`, o.text, LIMITS.optionText, ['plain_text']);
        if (typeof o.value !== 'string' || o.value.length === 0) errs.push(`${op}/value: must be a non-empty string`);
        else if (o.value.length > LIMITS.optionValue) errs.push(`${op}/value: ${o.value.length} chars > ${LIMITS.optionValue}`);
      });
    }
    if (e.confirm !== undefined) checkConfirm(errs, `${p}/confirm`, e.confirm);
    return;
  }
  if (e.type !== 'button') return;
  checkText(errs, `${p}/text`, e.text, LIMITS.buttonText, ['plain_text']);
  if (e.value !== undefined) {
    if (typeof e.value !== 'string') errs.push(`${p}/value: must be a string`);
    else if (e.value.length > LIMITS.buttonValue) errs.push(`${p}/value: ${e.value.length} chars > ${LIMITS.buttonValue}`);
  }
  if (e.url !== undefined) {
    if (typeof e.url !== 'string') errs.push(`${p}/url: must be a string`);
    else if (e.url.length > LIMITS.buttonUrl) errs.push(`${p}/url: ${e.url.length} chars > ${LIMITS.buttonUrl}`);
  }
  if (e.style !== undefined && e.style !== 'primary' && e.style !== 'danger') {
    errs.push(`${p}/style: must be primary or danger`);
  }
  if (e.confirm !== undefined) checkConfirm(errs, `${p}/confirm`, e.confirm);
}

function checkConfirm(errs: string[], cp: string, c: unknown): void {
  if (!isObj(c)) {
    errs.push(`${cp}: must be an object`);
    return;
  }
  checkText(errs, `${cp}/title`, c.title, LIMITS.confirmTitle, ['plain_text']);
  checkText(errs, `${cp}/text`, c.text, LIMITS.confirmText);
  checkText(errs, `${cp}/confirm`, c.confirm, LIMITS.confirmButton, ['plain_text']);
  checkText(errs, `${cp}/deny`, c.deny, LIMITS.confirmButton, ['plain_text']);
  if (c.style !== undefined && c.style !== 'primary' && c.style !== 'danger') errs.push(`${cp}/style: must be primary or danger`);
}
