/**
 * Schema migrations of the store, applied in order; `PRAGMA user_version` holds how many have been applied.
 *
 * Rules: never edit or reorder a released step; add a new one at the end. Each step runs in its own
 * transaction together with the `user_version` bump, so a crash leaves the schema at a step boundary.
 * Times are INTEGER epoch ms UTC; JSON documents are TEXT.
 * Every step has its PostgreSQL twin at the same position in `src/store/migrations-postgres.ts` (same tables, columns
 * and indexes; test/store/migrations-postgres.test.ts compares them): add a new step to both lists.
 */

/** Step 1 (live mode, docs/design/architecture.md "Live mode"): cursors, seen auditIDs, token records, findings, poll runs. */
const V1 = `
CREATE TABLE cursors (
  source_id  TEXT PRIMARY KEY,
  cursor     TEXT NOT NULL
) STRICT;

CREATE TABLE seen (
  cluster    TEXT NOT NULL,
  audit_id   TEXT NOT NULL,
  seen_at    INTEGER NOT NULL,
  PRIMARY KEY (cluster, audit_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX seen_by_time ON seen (cluster, seen_at);

CREATE TABLE token_records (
  cluster          TEXT NOT NULL,
  kind             TEXT NOT NULL CHECK (kind IN ('stale-token', 'legacy-token', 'unauthorized')),
  subject          TEXT NOT NULL,
  token_key        TEXT NOT NULL,
  namespace        TEXT NOT NULL,
  service_account  TEXT NOT NULL,
  last_seen        INTEGER NOT NULL,
  record           TEXT NOT NULL,
  PRIMARY KEY (cluster, kind, subject, token_key)
) STRICT;
CREATE INDEX token_records_by_last_seen ON token_records (cluster, last_seen);

CREATE TABLE findings (
  id               TEXT PRIMARY KEY,
  cluster          TEXT NOT NULL,
  namespace        TEXT NOT NULL,
  service_account  TEXT NOT NULL,
  kind             TEXT NOT NULL,
  severity         TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  status           TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'snoozed')),
  snoozed_until    INTEGER,
  resolved_at      INTEGER,
  last_seen        INTEGER NOT NULL,
  rejection_at     INTEGER,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finding          TEXT NOT NULL
) STRICT;
CREATE INDEX findings_by_cluster ON findings (cluster, status);

CREATE TABLE poll_runs (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  cluster     TEXT NOT NULL,
  source      TEXT NOT NULL,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  events      INTEGER NOT NULL DEFAULT 0,
  token_uses  INTEGER NOT NULL DEFAULT 0,
  error       TEXT,
  stats       TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX poll_runs_by_cluster ON poll_runs (cluster, id);
`;

/** Step 2 (docs/design/architecture.md "Slack and approvals"): message refs, approvals, votes, action log. */
const V2 = `
CREATE TABLE message_refs (
  finding_id  TEXT PRIMARY KEY REFERENCES findings (id) ON DELETE CASCADE,
  channel     TEXT NOT NULL,
  ts          TEXT NOT NULL,
  severity    TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  hash        TEXT NOT NULL
) STRICT;

CREATE TABLE approvals (
  id                  TEXT PRIMARY KEY,
  cluster             TEXT NOT NULL,
  finding_id          TEXT NOT NULL,
  action              TEXT NOT NULL,
  target              TEXT NOT NULL,
  requester           TEXT NOT NULL,
  state               TEXT NOT NULL CHECK (state IN ('requested', 'approved', 'running', 'succeeded', 'failed', 'rejected', 'expired')),
  required_approvals  INTEGER NOT NULL,
  created_at          INTEGER NOT NULL,
  expires_at          INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL,
  dry_run             TEXT,
  error               TEXT,
  message_channel     TEXT,
  message_ts          TEXT
) STRICT;
CREATE INDEX approvals_by_state ON approvals (state, expires_at);
CREATE INDEX approvals_by_cluster ON approvals (cluster, created_at);

CREATE TABLE votes (
  approval_id  TEXT NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
  user         TEXT NOT NULL,
  vote         TEXT NOT NULL CHECK (vote IN ('approve', 'reject')),
  at           INTEGER NOT NULL,
  reason       TEXT,
  seq          INTEGER NOT NULL,
  PRIMARY KEY (approval_id, user)
) STRICT;

CREATE TABLE action_log (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  at           INTEGER NOT NULL,
  cluster      TEXT NOT NULL,
  finding_id   TEXT,
  approval_id  TEXT,
  actor        TEXT,
  action       TEXT NOT NULL,
  target       TEXT NOT NULL,
  result       TEXT NOT NULL,
  detail       TEXT
) STRICT;
CREATE INDEX action_log_by_cluster ON action_log (cluster, at);
CREATE INDEX action_log_by_approval ON action_log (approval_id);
`;

/**
 * Slack request keys already handled (HTTP: the request signature; Socket Mode: the envelope id and the payload's
 * trigger/event id), shared by every replica so a replay or redelivery reaching another replica is caught too.
 * Rows expire (`expires_at`, epoch ms) shortly after Slack's 5-minute signature window; see src/slack/replay.ts.
 */
export const V_SLACK_REPLAY_CACHE = `
CREATE TABLE slack_seen_requests (
  key          TEXT PRIMARY KEY,
  seen_at      INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX slack_seen_requests_by_expiry ON slack_seen_requests (expires_at);
`;

/**
 * API-server token metrics (docs/design/architecture.md "Signals besides the audit log"): one row per `/metrics` scrape, keyed by the API-server process
 * (`process_start_time_seconds` in epoch ms), so rates are computed only between scrapes of one process.
 * `counters` is a JSON object of the `serviceaccount_*` counters (`TokenCounters`).
 */
const V_APISERVER_TOKEN_METRICS = `
CREATE TABLE token_metric_samples (
  cluster        TEXT NOT NULL,
  process_start  INTEGER NOT NULL,
  scraped_at     INTEGER NOT NULL,
  counters       TEXT NOT NULL,
  PRIMARY KEY (cluster, process_start, scraped_at)
) STRICT;
CREATE INDEX token_metric_samples_by_time ON token_metric_samples (cluster, scraped_at);
`;

/**
 * Step (docs/design/architecture.md "Slack and approvals": one open action per target, crash-safe steps): one open action per target, and what an action did, for crash-safe resumption.
 * - `target_key` = cluster␟kind␟namespace␟name of the object the action changes; `subject_key` =
 *   cluster␟namespace␟serviceAccount the action is about (the finding's ServiceAccount for a restart, the
 *   ServiceAccount itself for a recreation). `ApprovalRepository.claim` refuses a new request while an open one
 *   (requested / approved / running) has the same target, or the same subject and the other action. Rows of
 *   earlier versions are backfilled.
 * - `started_at`: when execution started (epoch ms; for a restart, the `restartedAt` value sent), written before
 *   any Kubernetes write; `execution`: JSON record of what was done (PATCH response, the ServiceAccount body to
 *   recreate and which step completed); `progress_channel`/`progress_ts`: the rollout progress message.
 * - `alert_intents`: an alert about to be posted (written before chat.postMessage, deleted with the message ref
 *   saved), so a process that died in between looks the message up by its metadata instead of posting it twice.
 */
const V_ACTION_TARGETS = `
ALTER TABLE approvals ADD COLUMN target_key TEXT;
ALTER TABLE approvals ADD COLUMN subject_key TEXT;
ALTER TABLE approvals ADD COLUMN started_at INTEGER;
ALTER TABLE approvals ADD COLUMN execution TEXT;
ALTER TABLE approvals ADD COLUMN progress_channel TEXT;
ALTER TABLE approvals ADD COLUMN progress_ts TEXT;
UPDATE approvals SET
  target_key = cluster || char(31) || json_extract(target, '$.kind') || char(31) || json_extract(target, '$.namespace')
    || char(31) || json_extract(target, '$.name'),
  subject_key = CASE WHEN json_extract(target, '$.kind') = 'ServiceAccount'
    THEN cluster || char(31) || json_extract(target, '$.namespace') || char(31) || json_extract(target, '$.name')
    ELSE (SELECT f.cluster || char(31) || f.namespace || char(31) || f.service_account FROM findings f WHERE f.id = approvals.finding_id) END;
CREATE INDEX approvals_by_target ON approvals (target_key, state);
CREATE INDEX approvals_by_subject ON approvals (subject_key, state);

CREATE TABLE alert_intents (
  finding_id  TEXT PRIMARY KEY REFERENCES findings (id) ON DELETE CASCADE,
  channel     TEXT NOT NULL,
  at          INTEGER NOT NULL
) STRICT;
`;

/**
 * Findings that conclude (docs/live-mode.md, "Findings that conclude"): why a finding was resolved — `verified` (a fix was verified), `quiet` (its
 * signal stayed absent for the quiet period while polls succeeded), `manual` — shown on its alert. Null for findings
 * resolved before this step and for unresolved ones.
 */
const V_FINDING_RESOLUTION = `
ALTER TABLE findings ADD COLUMN resolution TEXT;
`;

/**
 * One poller per SQLite store (docs/design/architecture.md "Live mode"): the process that polls holds this
 * single row and refreshes `heartbeat_at` (epoch ms); another process refuses to poll while the heartbeat is
 * fresh. `holder` is a random id per process; `host` and `pid` name it in the refusal.
 */
const V_POLLER_LOCK = `
CREATE TABLE poller_lock (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  holder        TEXT NOT NULL,
  host          TEXT NOT NULL,
  pid           INTEGER NOT NULL,
  acquired_at   INTEGER NOT NULL,
  heartbeat_at  INTEGER NOT NULL
) STRICT;
`;

/**
 * One alert per root cause (docs/slack.md "Alerts"): the Slack message of an alert group — every finding of one
 * ServiceAccount of one cluster — keyed by the group id (`groupIdOf` in src/findings/groups.ts). `signals` is the JSON
 * array of the finding kinds the message showed as live (to say in the thread when one starts or stops). Per-finding
 * `message_refs` of earlier versions are merged into these at the first poll (the newer message is kept) and deleted.
 * `alert_group_intents` is `alert_intents` per group: written before chat.postMessage, deleted with the ref.
 */
const V_ALERT_GROUPS = `
CREATE TABLE alert_refs (
  group_id   TEXT PRIMARY KEY,
  cluster    TEXT NOT NULL,
  channel    TEXT NOT NULL,
  ts         TEXT NOT NULL,
  severity   TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  hash       TEXT NOT NULL,
  signals    TEXT NOT NULL DEFAULT '[]'
) STRICT;

CREATE TABLE alert_group_intents (
  group_id   TEXT PRIMARY KEY,
  channel    TEXT NOT NULL,
  at         INTEGER NOT NULL
) STRICT;
`;

/**
 * The Slack notification queue (docs/slack.md "Notification queue"): one pending work item per `item_key`
 * (`alert:<groupId>`, `digest:<channel>:<createdAt>`), sent by the drainer at Slack's rates and deleted once sent;
 * `first_call` is `post` or `edit`, `urgency` the sort key (epoch ms of the earliest rejection, smaller first; BIGINT
 * on PostgreSQL), `version` bumped by every merge of a later poll's item, `payload` a JSON document
 * (`OutboxPayload`, src/store/outbox.ts).
 */
const V_SLACK_OUTBOX = `
CREATE TABLE slack_outbox (
  item_key     TEXT PRIMARY KEY,
  kind         TEXT NOT NULL CHECK (kind IN ('alert', 'digest')),
  cluster      TEXT NOT NULL,
  channel      TEXT NOT NULL,
  first_call   TEXT NOT NULL CHECK (first_call IN ('post', 'edit')),
  urgency      INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  not_before   INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  version      INTEGER NOT NULL DEFAULT 0,
  payload      TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX slack_outbox_by_urgency ON slack_outbox (urgency, enqueued_at);
`;

/**
 * Portable cursor keys: each cluster's `watchedSince` row in `cursors` was keyed `\0watched-since\0<cluster>`; a NUL
 * byte cannot be stored in PostgreSQL text (nor copied there by `tokenwatch store copy`), so it becomes
 * `watched-since:<cluster>` (src/store/polls.ts). Compared as bytes: SQLite's text functions stop at a NUL.
 */
const V_PORTABLE_CURSOR_KEYS = `
UPDATE cursors SET source_id = 'watched-since:' || CAST(substr(CAST(source_id AS BLOB), 16) AS TEXT)
  WHERE hex(substr(CAST(source_id AS BLOB), 1, 15)) = '00776174636865642D73696E636500';
`;

/**
 * Clusters shared out across replicas (docs/design/architecture.md "Clusters shared out across replicas"): a
 * heartbeat row per running `serve` process (`clusters`: JSON array of the cluster names in its config) and an
 * ownership row per cluster; `owner` is NULL once released, `epoch` is bumped at every change of owner (fencing).
 */
const V_CLUSTER_OWNERS = `
CREATE TABLE replicas (
  id            TEXT PRIMARY KEY,
  host          TEXT NOT NULL,
  started_at    INTEGER NOT NULL,
  heartbeat_at  INTEGER NOT NULL,
  clusters      TEXT NOT NULL DEFAULT '[]'
) STRICT;

CREATE TABLE cluster_owners (
  cluster     TEXT PRIMARY KEY,
  owner       TEXT,
  epoch       INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  changed_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX cluster_owners_by_owner ON cluster_owners (owner);
`;

/**
 * The backfill of {@link V_VERIFICATION_COLUMNS}, the same SQL on both backends (src/store/migrations-postgres.ts
 * runs it too): each approval's earliest `verification.*` / `probe-check.*` action-log row gives the column its value.
 */
export const VERIFICATION_BACKFILL = `
UPDATE approvals SET
  verification = (SELECT l.result FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'verification.%' ORDER BY l.at, l.id LIMIT 1),
  verified_at = (SELECT l.at FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'verification.%' ORDER BY l.at, l.id LIMIT 1)
  WHERE EXISTS (SELECT 1 FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'verification.%');
UPDATE approvals SET
  probe_check = (SELECT l.result FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'probe-check.%' ORDER BY l.at, l.id LIMIT 1),
  probe_checked_at = (SELECT l.at FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'probe-check.%' ORDER BY l.at, l.id LIMIT 1)
  WHERE EXISTS (SELECT 1 FROM action_log l WHERE l.approval_id = approvals.id AND l.action LIKE 'probe-check.%');
`;

/**
 * Verification as columns of the approval (docs/design/architecture.md "Slack and approvals"): the verifier's
 * conclusion on a succeeded action (`verification`: `resolved`, `recurrence`, `persisting` or `superseded`;
 * `verified_at` epoch ms) and the node-probe check's (`probe_check`: `rewritten`, `not-rewritten` or `none`;
 * `probe_checked_at`), each recorded once by a compare-and-set on the NULL column. Earlier versions recorded them only
 * as `verification.<outcome>` / `probe-check.<outcome>` action-log rows: the earliest such row of each approval is
 * backfilled. Additive: a replica on an older binary keeps running on it.
 */
const V_VERIFICATION_COLUMNS = `
ALTER TABLE approvals ADD COLUMN verification TEXT;
ALTER TABLE approvals ADD COLUMN verified_at INTEGER;
ALTER TABLE approvals ADD COLUMN probe_check TEXT;
ALTER TABLE approvals ADD COLUMN probe_checked_at INTEGER;
${VERIFICATION_BACKFILL}`;

/**
 * Scan requests (docs/design/architecture.md "How `serve` is put together, and one click's path"): `/tokens scan` on a
 * replica that does not poll the cluster leaves one row per cluster (`requested_at` epoch ms) for the replica that
 * does, which deletes it as it takes it (src/store/scan-requests.ts). Earlier versions kept the request as a
 * `slack:scan-request:<cluster>` row of `cursors` (its cursor the request time, `0` once taken): pending ones move
 * here and the rows are deleted. Additive for a replica on an older binary (it finds no request in `cursors`).
 */
const V_SCAN_REQUESTS = `
CREATE TABLE scan_requests (
  cluster       TEXT PRIMARY KEY,
  requested_at  INTEGER NOT NULL
) STRICT;
INSERT INTO scan_requests (cluster, requested_at)
  SELECT substr(source_id, 20), CAST(cursor AS INTEGER) FROM cursors
   WHERE substr(source_id, 1, 19) = 'slack:scan-request:' AND CAST(cursor AS INTEGER) > 0;
DELETE FROM cursors WHERE substr(source_id, 1, 19) = 'slack:scan-request:';
`;

/**
 * Every scheduled tick accounted for (docs/design/architecture.md "Clusters shared out across replicas"): a poll run
 * records the cron tick it ran for (`scheduled_at`, epoch ms; NULL for the start-up poll and `/tokens scan`), and a
 * tick that started no poll gets a `missed_polls` row with its reason (`overlap`, `coalesced`, `unowned`): one per
 * cluster and tick, whichever replica records it first.
 */
const V_POLL_TICKS = `
ALTER TABLE poll_runs ADD COLUMN scheduled_at INTEGER;
CREATE INDEX poll_runs_by_tick ON poll_runs (cluster, scheduled_at);
CREATE TABLE missed_polls (
  cluster       TEXT NOT NULL,
  scheduled_at  INTEGER NOT NULL,
  reason        TEXT NOT NULL,
  replica       TEXT,
  recorded_at   INTEGER NOT NULL,
  PRIMARY KEY (cluster, scheduled_at)
) STRICT;
`;

/**
 * Audit webhook batches in the shared store (src/sources/webhook.ts "Shared store"): any replica writes an accepted
 * batch here before its 200; the cluster's owner reads and deletes the rows at its polls. `events` holds the batch's
 * event JSON texts that may hold a token use, one per line; `bytes` its size; times epoch ms. AUTOINCREMENT: an id is
 * never reused, since a poll's cursor names the ids it will delete.
 */
const V_WEBHOOK_BATCHES = `
CREATE TABLE webhook_batches (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  cluster      TEXT NOT NULL,
  received_at  INTEGER NOT NULL,
  event_count  INTEGER NOT NULL,
  bytes        INTEGER NOT NULL,
  events       TEXT NOT NULL
) STRICT;
CREATE INDEX webhook_batches_by_cluster ON webhook_batches (cluster, id);
`;

/**
 * Request budgets of outside quotas shared across replicas (src/store/rate-buckets.ts, src/core/token-bucket.ts): one
 * token bucket per key (`<account>/<region>/<operation>` of CloudWatch Logs, `slack/<team>/<method>` of the Slack Web
 * API). `tokens` and `rate` (tokens per second) are fractional; `updated_at` and `last_throttle_at` epoch ms.
 */
const V_RATE_BUCKETS = `
CREATE TABLE rate_buckets (
  key              TEXT PRIMARY KEY,
  tokens           REAL NOT NULL,
  updated_at       REAL NOT NULL,
  rate             REAL NOT NULL,
  last_throttle_at REAL
) STRICT;
`;

/**
 * Start-up polls of clusters shared out across replicas (src/runtime/compose.ts, src/store/cluster-owners.ts): which
 * replica claimed each cluster's start-up poll, so that of replicas starting together one polls it. A claim holds
 * while its replica is live (its `replicas` row fresh); `claimed_at` epoch ms.
 */
const V_STARTUP_POLLS = `
CREATE TABLE startup_polls (
  cluster     TEXT PRIMARY KEY,
  replica     TEXT NOT NULL,
  claimed_at  INTEGER NOT NULL
) STRICT;
`;

/**
 * Follow-ups of alerts and approvals through the notification queue (docs/slack.md "Reminders, escalation and
 * paging"): `slack_outbox` takes a third kind of item, `notice` (a reminder, an escalation, an outcome told to the
 * requester, a page or its resolve), so its kind CHECK is widened — SQLite cannot alter a CHECK, so the table is
 * rebuilt with its rows. `slack_notices` records each notice sent (its key, when, where), in the transaction that
 * deletes its queue row: a notice is enqueued only while neither a row nor a record of its key exists. `alert_pages`
 * keeps, per alert group, the current paging episode: since when it is critical, when someone acted on it (an
 * approval request, a snooze, a Details view) and when it resolved. Times epoch ms UTC.
 */
const V_NOTICES = `
CREATE TABLE slack_outbox_v2 (
  item_key     TEXT PRIMARY KEY,
  kind         TEXT NOT NULL CHECK (kind IN ('alert', 'digest', 'notice')),
  cluster      TEXT NOT NULL,
  channel      TEXT NOT NULL,
  first_call   TEXT NOT NULL CHECK (first_call IN ('post', 'edit')),
  urgency      INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  not_before   INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  version      INTEGER NOT NULL DEFAULT 0,
  payload      TEXT NOT NULL DEFAULT '{}'
) STRICT;
INSERT INTO slack_outbox_v2 SELECT item_key, kind, cluster, channel, first_call, urgency, enqueued_at, not_before, attempts, version, payload FROM slack_outbox;
DROP TABLE slack_outbox;
ALTER TABLE slack_outbox_v2 RENAME TO slack_outbox;
CREATE INDEX slack_outbox_by_urgency ON slack_outbox (urgency, enqueued_at);

CREATE TABLE slack_notices (
  notice_key  TEXT PRIMARY KEY,
  sent_at     INTEGER NOT NULL,
  channel     TEXT,
  ts          TEXT
) STRICT;

CREATE TABLE alert_pages (
  group_id        TEXT PRIMARY KEY,
  cluster         TEXT NOT NULL,
  episode         INTEGER NOT NULL,
  critical_since  INTEGER,
  acted_at        INTEGER,
  resolved_at     INTEGER
) STRICT;
`;

/**
 * Retention and poll-run reads at fleet scale: the prunes after every poll (`PollRepository.pruneRuns`,
 * `ActionLogRepository.prune`) visit only the rows past retention (`poll_runs_by_start`, `missed_polls_by_tick`,
 * `action_log_by_time`), a poll's quiet-resolution coverage reads its cluster's runs of the period
 * (`poll_runs_by_cluster_start`), a cluster's last success is one index seek (`poll_runs_succeeded`), and its alert
 * refs one indexed read per poll (`alert_refs_by_cluster`, `SlackRefRepository.alertRefsOf`). Without them
 * each read the whole table, or the cluster's whole history: at 1,000 clusters on a 5-minute schedule with 7 days
 * kept (2 million poll runs), about 120 ms for each poll-run prune (docs/performance.md "Poll runs at fleet scale").
 * The same statements are PostgreSQL's step (src/store/migrations-postgres.ts).
 */
export const V_RETENTION_INDEXES = `
CREATE INDEX poll_runs_by_start ON poll_runs (started_at);
CREATE INDEX poll_runs_by_cluster_start ON poll_runs (cluster, started_at);
CREATE INDEX poll_runs_succeeded ON poll_runs (cluster, ended_at) WHERE ended_at IS NOT NULL AND error IS NULL;
CREATE INDEX missed_polls_by_tick ON missed_polls (scheduled_at);
CREATE INDEX action_log_by_time ON action_log (at);
CREATE INDEX alert_refs_by_cluster ON alert_refs (cluster);
`;

/** All migration steps; the schema version is the number applied. */
export const MIGRATIONS: readonly string[] = [
  V1,
  V2,
  V_SLACK_REPLAY_CACHE,
  V_APISERVER_TOKEN_METRICS,
  V_ACTION_TARGETS,
  V_FINDING_RESOLUTION,
  V_POLLER_LOCK,
  V_ALERT_GROUPS,
  V_SLACK_OUTBOX,
  V_PORTABLE_CURSOR_KEYS,
  V_CLUSTER_OWNERS,
  V_VERIFICATION_COLUMNS,
  V_SCAN_REQUESTS,
  V_POLL_TICKS,
  V_WEBHOOK_BATCHES,
  V_RATE_BUCKETS,
  V_STARTUP_POLLS,
  V_NOTICES,
  V_RETENTION_INDEXES,
];

