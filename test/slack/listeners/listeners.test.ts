/**
 * The Bolt listeners called directly, as the Bolt TypeScript starter tests them: a fake `app` records what each
 * `register(app, deps)` registers, and each listener is called with a fake `ack`, payload and `respond`.
 */
import type { App } from '@slack/bolt';
import { describe, expect, it, vi } from 'vitest';
import { ACTION_IDS, REJECT_MODAL_CALLBACK_ID, RECREATE_MODAL_CALLBACK_ID, REJECT_REASON_INPUT, REJECT_REASON_MAX, type SlackMessage } from '../../../src/slack/blocks/index.js';
import { register as registerActions } from '../../../src/slack/listeners/actions.js';
import { register as registerCommands } from '../../../src/slack/listeners/commands.js';
import type { ListenerDeps } from '../../../src/slack/listeners/deps.js';
import { registerListeners } from '../../../src/slack/listeners/index.js';
import { register as registerViews } from '../../../src/slack/listeners/views.js';
import { createLogger } from '../../../src/observability/logger.js';

type Listener = (args: Record<string, unknown>) => Promise<void>;

/** An `App` that only records registrations. */
function fakeApp() {
  const commands = new Map<string, Listener>();
  const actions: Array<[unknown, Listener]> = [];
  const views = new Map<string, Listener>();
  const app = {
    command: (name: string, fn: Listener) => void commands.set(name, fn),
    action: (id: unknown, fn: Listener) => void actions.push([id, fn]),
    view: (id: string, fn: Listener) => void views.set(id, fn),
  } as unknown as App;
  return { app, commands, actions, views };
}

const MESSAGE: SlackMessage = { text: 'hello', blocks: [] };

function deps(order: string[]) {
  const d = {
    command: {
      handle: vi.fn(async (text: string, user: string, channel: { id: string }) => {
        order.push(`handle ${text} ${user} ${channel.id}`);
        return MESSAGE;
      }),
    },
    flow: {
      onFindingButton: vi.fn(async () => void order.push('onFindingButton')),
      vote: vi.fn(async () => void order.push('vote')),
      rejectWithReason: vi.fn(async () => void order.push('rejectWithReason')),
      confirmedRecreate: vi.fn(async () => void order.push('confirmedRecreate')),
    },
    api: { countError: vi.fn(), ephemeral: vi.fn(async () => undefined) },
    logger: createLogger({ level: 'silent' }),
    track: <T>(p: Promise<T>) => p,
  };
  return d satisfies ListenerDeps;
}

describe('slack listeners', () => {
  it('registers /tokens, every button and the reject modal, one register(app, deps) per kind', () => {
    const { app, commands, actions, views } = fakeApp();
    registerListeners(app, deps([]));
    expect([...commands.keys()]).toEqual(['/tokens']);
    expect(actions.map(([id]) => id)).toEqual(expect.arrayContaining([ACTION_IDS.approve, ACTION_IDS.reject, ACTION_IDS.details, ACTION_IDS.snooze1d, ACTION_IDS.snooze7d, ACTION_IDS.recreateServiceAccount, ACTION_IDS.more]));
    expect(actions).toHaveLength(8);
    expect([...views.keys()]).toEqual([REJECT_MODAL_CALLBACK_ID, RECREATE_MODAL_CALLBACK_ID]);
  });

  it('/tokens acks first, then answers ephemerally through respond', async () => {
    const order: string[] = [];
    const d = deps(order);
    const { app, commands } = fakeApp();
    registerCommands(app, d);
    const respond = vi.fn(async () => void order.push('respond'));
    await commands.get('/tokens')!({ ack: async () => void order.push('ack'), command: { text: 'status', user_id: 'U1', channel_id: 'C1', channel_name: 'ops' }, respond });
    expect(order).toEqual(['ack', 'handle status U1 C1', 'respond']);
    expect(respond).toHaveBeenCalledWith({ response_type: 'ephemeral', replace_original: false, text: 'hello', blocks: [] });
    expect(d.api.ephemeral).not.toHaveBeenCalled();
  });

  it('falls back to chat.postEphemeral when response_url fails, and counts the failure', async () => {
    const d = deps([]);
    const { app, commands } = fakeApp();
    registerCommands(app, d);
    const respond = vi.fn(async () => {
      throw new Error('expired_url');
    });
    await commands.get('/tokens')!({ ack: async () => undefined, command: { text: 'help', user_id: 'U1', channel_id: 'C1', channel_name: 'ops' }, respond });
    expect(d.api.countError).toHaveBeenCalledWith('response_url', 'respond_failed');
    expect(d.api.ephemeral).toHaveBeenCalledWith('C1', 'U1', MESSAGE, undefined);
  });

  it('an Approve click acks first, then votes with the button value', async () => {
    const order: string[] = [];
    const d = deps(order);
    const { app, actions } = fakeApp();
    registerActions(app, d);
    const approve = actions.find(([id]) => id === ACTION_IDS.approve)![1];
    const body = { user: { id: 'U2' }, channel: { id: 'C1', name: 'ops' }, message: { thread_ts: '1.2' }, trigger_id: 'T1' };
    await approve({ ack: async () => void order.push('ack'), body, action: { action_id: ACTION_IDS.approve, value: 'opaque-id' }, respond: vi.fn() });
    expect(order).toEqual(['ack', 'vote']);
    expect(d.flow.vote).toHaveBeenCalledWith(expect.objectContaining({ user: 'U2', channel: { id: 'C1', name: 'ops' }, triggerId: 'T1' }), 'opaque-id', 'approve');
  });

  it('the reject modal acks first, then rejects with the reason cut to its maximum', async () => {
    const order: string[] = [];
    const d = deps(order);
    const { app, views } = fakeApp();
    registerViews(app, d);
    const reason = 'x'.repeat(REJECT_REASON_MAX + 10);
    const view = { private_metadata: 'meta', state: { values: { [REJECT_REASON_INPUT]: { [REJECT_REASON_INPUT]: { value: reason } } } } };
    await views.get(REJECT_MODAL_CALLBACK_ID)!({ ack: async () => void order.push('ack'), body: { user: { id: 'U3' } }, view });
    expect(order).toEqual(['ack', 'rejectWithReason']);
    expect(d.flow.rejectWithReason).toHaveBeenCalledWith('U3', 'meta', 'x'.repeat(REJECT_REASON_MAX), expect.any(Function));
  });
});
