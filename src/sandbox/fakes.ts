/**
 * The loopback fakes the sandbox runs on — the fake Slack (`fakes/slack.ts`) and the fake Kubernetes API server
 * (`fakes/kubernetes.ts`) — loaded at run time, with the part of their API the sandbox uses typed here.
 *
 * Why not plain imports: the fakes live outside `src/`, and `npm run build` (tsconfig.build.json, `rootDir: src`)
 * refuses source files outside `src/`. They are loaded by URL relative to the package root instead — the same path
 * from `src/sandbox/` and from `dist/sandbox/` — through tsx when Node cannot load TypeScript by itself (tsx is a
 * runtime dependency; bin/tokenwatch.js uses it the same way). `test/sandbox/fakes.test.ts` checks at compile time that
 * the real fakes satisfy {@link SandboxFakes}, so these types cannot drift from them.
 */

/** A Kubernetes object as JSON (`fakes/kubernetes.ts` `KubeObject`). */
export type KubeObject = Record<string, unknown> & { apiVersion?: string; kind?: string; metadata?: Record<string, unknown> };

/** A change in the fake API server's store. */
export interface WriteEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  def: { kind: string };
  object: KubeObject;
  previous?: KubeObject;
}

/** The fake API server's object store (Kubernetes semantics for resourceVersion, uid, generation). */
export interface ObjectStore {
  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  list(kind: string, opts?: { namespace?: string; fieldSelector?: string; labelSelector?: string }): KubeObject[];
  put(obj: object): KubeObject;
  update(kind: string, namespace: string | undefined, name: string, mutate: (obj: KubeObject) => KubeObject | void): KubeObject;
  delete(kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  onWrite(listener: (e: WriteEvent) => void): () => void;
}

/** One request the fake API server received. */
export interface RecordedRequest {
  method: string;
  path: string;
  dryRun: boolean;
  resource?: string;
  namespace?: string;
  name?: string;
  body?: unknown;
}

/** A running fake API server. */
export interface FakeKube {
  readonly url: string;
  readonly port: number;
  readonly store: ObjectStore;
  requestsMatching(match: (req: RecordedRequest) => boolean): RecordedRequest[];
  close(): Promise<void>;
}

/** A message of the fake Slack (top level or thread reply). */
export interface FakeMessage {
  channel: string;
  ts: string;
  threadTs?: string;
  user: string;
  botId?: string;
  text: string;
  blocks: unknown[] | undefined;
  edits: Array<{ at: number; text: string; blocks: unknown[] | undefined }>;
  replies: FakeMessage[];
  deleted?: boolean;
  postedAt: number;
}

/** An ephemeral message (visible to `user` only). */
export interface FakeEphemeral {
  channel: string;
  user: string;
  text: string;
  blocks: unknown[] | undefined;
  messageTs: string;
  threadTs?: string;
  via: 'api' | 'response_url';
  at: number;
}

/** One Web API call the fake Slack answered. */
export interface FakeCall {
  method: string;
  args: Record<string, unknown>;
  status: number;
  response: Record<string, unknown>;
  at: number;
}

/** A change of the fake Slack's state. */
export type FakeSlackChange =
  | { type: 'message' | 'update' | 'delete'; message: FakeMessage }
  | { type: 'ephemeral'; ephemeral: FakeEphemeral }
  | { type: 'call'; call: FakeCall };

/** Options of `startFakeSlack` the sandbox uses. */
export interface FakeSlackOptions {
  tokens?: Record<string, Partial<{ teamId: string; team: string; userId: string; user: string; botId: string }>>;
  channels?: Array<{ id: string; name?: string; botIsMember?: boolean; members?: string[] }>;
  autoCreateChannels?: boolean;
  users?: Array<{ id: string; name: string; realName?: string; isBot?: boolean }>;
  now?: () => number;
}

/** A running fake Slack. */
export interface FakeSlack {
  url: string;
  /** `http://127.0.0.1:<port>/api/` */
  apiUrl: string;
  port: number;
  callsTo(method: string): FakeCall[];
  messages(channel: string): FakeMessage[];
  thread(channel: string, ts: string): FakeMessage[];
  message(channel: string, ts: string): FakeMessage | undefined;
  ephemerals(filter?: { user?: string; channel?: string }): FakeEphemeral[];
  snapshot(): { channels: Array<{ id: string; name: string; botIsMember: boolean; messages: FakeMessage[] }>; ephemerals: FakeEphemeral[] };
  postAsUser(channel: string, user: string, text: string): FakeMessage;
  responseUrl(target: { channel: string; user: string; messageTs?: string }): string;
  on(event: 'change', listener: (change: FakeSlackChange) => void): () => void;
  close(): Promise<void>;
}

/** A bot's answer to a signed request. */
export interface SendResult {
  status: number;
  body: string;
  headers: Headers;
}

/** Slash command form fields (`fakes/slack.ts` `SlashCommandFields`). */
export interface SlashCommandFields {
  command?: string;
  text: string;
  user_id: string;
  channel_id: string;
  user_name?: string;
  channel_name?: string;
  team_id?: string;
  team_domain?: string;
  response_url?: string;
  trigger_id?: string;
}

/** One button click (`fakes/slack.ts` `ButtonClick`). */
export interface ButtonClick {
  user: string;
  userName?: string;
  actionId: string;
  value: string;
  blockId?: string;
  text?: string;
  channel: string;
  channelName?: string;
  messageTs: string;
  message?: { text?: string; blocks?: unknown[] };
  teamId?: string;
  responseUrl?: string;
  ephemeral?: boolean;
}

/** What the sandbox uses of the fakes. */
export interface SandboxFakes {
  startFakeSlack(opts?: FakeSlackOptions): Promise<FakeSlack>;
  startFakeKube(opts?: { objects?: object[] }): Promise<FakeKube>;
  sendSlashCommand(url: string, secret: string, fields: SlashCommandFields): Promise<SendResult>;
  sendBlockAction(url: string, secret: string, payload: Record<string, unknown>): Promise<SendResult>;
  blockActionPayload(click: ButtonClick, nowSec?: number): Record<string, unknown>;
}

/** Imports a TypeScript module by URL, registering tsx first when Node cannot load `.ts` by itself. */
async function importTs(href: string): Promise<Record<string, unknown>> {
  try {
    return (await import(href)) as Record<string, unknown>;
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw err;
    const { register } = await import('tsx/esm/api');
    register();
    // Node caches the failed load under the URL: import it under another one.
    return (await import(`${href}?tsx`)) as Record<string, unknown>;
  }
}

function fn<T>(mod: Record<string, unknown>, name: string, file: string): T {
  const f = mod[name];
  if (typeof f !== 'function') throw new Error(`sandbox: ${file} does not export ${name}()`);
  return f as T;
}

/**
 * Loads `fakes/slack.ts` and `fakes/kubernetes.ts` (two directories above this module: the package root).
 * @throws Error when they cannot be found (e.g. an install without the `fakes/` directory).
 */
export async function loadFakes(): Promise<SandboxFakes> {
  const slackUrl = new URL('../../fakes/slack.ts', import.meta.url).href;
  const kubeUrl = new URL('../../fakes/kubernetes.ts', import.meta.url).href;
  let slack: Record<string, unknown>;
  let kube: Record<string, unknown>;
  try {
    [slack, kube] = await Promise.all([importTs(slackUrl), importTs(kubeUrl)]);
  } catch (err) {
    throw new Error(`sandbox: cannot load the loopback fakes (${slackUrl}, ${kubeUrl}): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return {
    startFakeSlack: fn<SandboxFakes['startFakeSlack']>(slack, 'startFakeSlack', 'fakes/slack.ts'),
    sendSlashCommand: fn<SandboxFakes['sendSlashCommand']>(slack, 'sendSlashCommand', 'fakes/slack.ts'),
    sendBlockAction: fn<SandboxFakes['sendBlockAction']>(slack, 'sendBlockAction', 'fakes/slack.ts'),
    blockActionPayload: fn<SandboxFakes['blockActionPayload']>(slack, 'blockActionPayload', 'fakes/slack.ts'),
    startFakeKube: fn<SandboxFakes['startFakeKube']>(kube, 'startFakeKube', 'fakes/kubernetes.ts'),
  };
}
