/**
 * Slack requests the tests build against the Slack fake (`src/sandbox/fakes/slack.ts`) that the sandbox itself never
 * sends: a modal's `view_submission`, and signed requests recorded byte for byte so that they can be replayed.
 */
import { DEFAULT_BOT, signSlackRequest, slashCommandBody, type FakeView, type SendOptions, type SendResult, type SlashCommandFields } from '../../src/sandbox/fakes/slack.js';

/**
 * A `view_submission` interaction payload (docs "Handling user interaction in modals"): the submitted modal `view`
 * (its `callback_id`, `private_metadata`) with `state.values[blockId][actionId] = { type: 'plain_text_input', value }`
 * from `values` (`{ blockId: { actionId: value } }`). Send it with `sendBlockAction` of the fake.
 */
export function viewSubmissionPayload(c: { user: string; view: FakeView; values?: Record<string, Record<string, string | null>>; teamId?: string }): Record<string, unknown> {
  const teamId = c.teamId ?? DEFAULT_BOT.teamId;
  const values: Record<string, Record<string, unknown>> = {};
  for (const [block, actions] of Object.entries(c.values ?? {})) {
    values[block] = Object.fromEntries(Object.entries(actions).map(([a, v]) => [a, { type: 'plain_text_input', value: v }]));
  }
  return {
    type: 'view_submission',
    team: { id: teamId, domain: DEFAULT_BOT.team },
    user: { id: c.user, username: c.user.toLowerCase(), name: c.user.toLowerCase(), team_id: teamId },
    api_app_id: 'A0FAKEAPP1',
    token: 'fake-verification-token',
    trigger_id: `${Math.floor(Date.now() / 1000)}.2.fake`,
    view: {
      id: c.view.id,
      team_id: teamId,
      ...c.view.view,
      state: { values },
      hash: 'fake-hash',
      app_id: 'A0FAKEAPP1',
      bot_id: DEFAULT_BOT.botId,
    },
    response_urls: [],
    is_enterprise_install: false,
    enterprise: null,
  };
}

/** A signed Slack request, kept byte for byte so it can be sent again ({@link sendRecordedRequest}). */
export interface RecordedRequest {
  body: string;
  headers: Record<string, string>;
}

/**
 * A signed slash command (form-urlencoded) as Slack would send it, without sending it: body and headers, signed at
 * `opts.timestampSec` (epoch seconds, default now).
 */
export function recordSlashCommand(secret: string, fields: SlashCommandFields, opts: SendOptions = {}): RecordedRequest {
  return recordSigned(secret, new URLSearchParams(slashCommandBody(fields)).toString(), opts);
}

/** A signed interaction (`payload=<JSON>`) as Slack would send it, without sending it. */
export function recordBlockAction(secret: string, payload: Record<string, unknown>, opts: SendOptions = {}): RecordedRequest {
  return recordSigned(secret, new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), opts);
}

function recordSigned(secret: string, body: string, opts: SendOptions): RecordedRequest {
  const sig = signSlackRequest(secret, body, opts.timestampSec ?? Math.floor(Date.now() / 1000));
  return { body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...sig, ...(opts.signature !== undefined ? { 'x-slack-signature': opts.signature } : {}) } };
}

/** POSTs a recorded request, byte-identical, to a bot's HTTP receiver (a replay when sent twice). */
export async function sendRecordedRequest(url: string, req: RecordedRequest): Promise<SendResult> {
  const res = await fetch(url, { method: 'POST', headers: req.headers, body: req.body });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/** A Socket Mode `events_api` envelope (api.slack.com/apis/socket-mode) around an Events API body. */
export function eventsApiEnvelope(envelopeId: string, body: Record<string, unknown>): Record<string, unknown> {
  return { envelope_id: envelopeId, type: 'events_api', accepts_response_payload: false, retry_attempt: 0, retry_reason: '', payload: body };
}
