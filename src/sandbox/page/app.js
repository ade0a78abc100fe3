// The sandbox channel page: renders the fake Slack channel with the Block Kit renderer, follows server-sent events,
// and sends slash commands and button clicks to the sandbox server, which signs them and forwards them to the bot
// exactly as Slack would. Plain browser JavaScript, no build step.
import { escapeHtml, mrkdwnToHtml, renderBlocks, renderMessageBody } from './blockkit.js';

const $ = (sel) => document.querySelector(sel);
const params = new URLSearchParams(location.search);
const COLORS = { U0REQUEST: '#e8912d', U0APPROVE: '#1264a3', U0OUTSIDE: '#7c3085', U0APPROVB: '#2eb67d' };

const ui = {
  me: params.get('user') || localStorage.getItem('tokenwatch-sandbox-user') || 'U0REQUEST',
  data: null,
  cluster: null,
  openThread: null,
  dismissed: new Set(),
  seenEphemerals: new Set(),
  seenNotices: new Set(),
  scrollToBottom: false,
  // The channel opens at its first critical alert (posted first, like Slack's "first unread"), and stays there until
  // you act (send a command, get an answer) or scroll yourself; then it follows the bottom like Slack.
  anchored: true,
  firstRender: true,
  now: Date.now(),
  /** `channel` or `home` (the app's Home tab). */
  tab: 'channel',
  /** Id of the channel shown (`?channel=` by id or name); null: the first the server lists. */
  channel: params.get('channel'),
};

const tsMs = (ts) => Math.floor(Number(ts) * 1000);

function timeOf(ms) {
  const iso = new Date(ms).toISOString();
  return { short: iso.slice(11, 16), full: `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC (sandbox time)` };
}

function renderCtx() {
  const users = {};
  for (const u of ui.data?.users ?? []) users[u.id] = u.name;
  if (ui.data) users[ui.data.bot.id] = ui.data.bot.name;
  const channels = {};
  for (const c of ui.data?.channels ?? []) channels[c.id] = c.name;
  return { users, channels, groups: ui.data?.groups ?? {}, now: ui.now };
}

function who(userId) {
  const u = (ui.data?.users ?? []).find((x) => x.id === userId);
  return u ? `${u.name} (${u.role})` : userId;
}

function avatar(userId, isBot) {
  if (isBot) return '<div class="avatar bot">TW</div>';
  const u = (ui.data?.users ?? []).find((x) => x.id === userId);
  const letter = escapeHtml((u?.name ?? userId).slice(0, 1));
  return `<div class="avatar" style="background:${COLORS[userId] ?? '#616061'}">${letter}</div>`;
}

/** One message (bot, person, ephemeral or notice) as HTML. */
function messageHtml(m, opts) {
  const isBot = Boolean(m.botId) || m.kind === 'ephemeral' || m.kind === 'notice';
  const name = m.kind === 'notice' ? 'Slackbot' : isBot ? escapeHtml(ui.data.bot.name) : escapeHtml(who(m.user));
  const t = timeOf(m.kind === 'notice' ? m.at : tsMs(m.ts));
  const cls = ['message', m.kind === 'ephemeral' ? 'ephemeral' : '', m.kind === 'notice' ? 'notice' : ''].join(' ');
  const only =
    m.kind === 'ephemeral' || m.kind === 'notice'
      ? `<div class="only-you">👁 Only visible to you · <button type="button" class="link" data-dismiss="${escapeHtml(m.key)}">Dismiss</button></div>`
      : '';
  const body = m.kind === 'notice' ? `<div class="bk-blocks"><div class="bk-block bk-text">${mrkdwnToHtml(m.text, renderCtx())}</div></div>` : renderMessageBody(m, renderCtx());
  const replies = opts.showReplies && m.replies?.length
    ? `<div class="thread-summary"><button type="button" data-open-thread="${escapeHtml(m.ts)}">${m.replies.length} ${m.replies.length === 1 ? 'reply' : 'replies'}</button></div>`
    : '';
  return (
    `<div class="${cls}" data-ts="${escapeHtml(m.ts ?? '')}" data-ephemeral="${m.kind === 'ephemeral' ? '1' : ''}" data-thread-ts="${escapeHtml(m.threadTs ?? '')}">` +
    avatar(m.user, isBot) +
    `<div class="msg-main"><div class="msg-meta"><span class="msg-name">${name}</span>${isBot && m.kind !== 'notice' ? '<span class="app-tag">APP</span>' : ''}` +
    `<span class="msg-time" title="${t.full}">${t.short}</span></div>${only}${body}${m.edited ? '<div class="edited">(edited)</div>' : ''}${replies}</div></div>`
  );
}

/**
 * Updates `container` to show `items` ({key, html}) in order, touching only what changed: an element is kept while
 * its HTML is the same, so a re-render does not replace (or detach) the messages that did not change.
 */
function patchList(container, items) {
  const existing = new Map();
  for (const el of [...container.children]) {
    if (el.dataset.key) existing.set(el.dataset.key, el);
    else el.remove();
  }
  const wanted = items.map(({ key, html }) => {
    const old = existing.get(key);
    if (old && old.__html === html) {
      existing.delete(key);
      return old;
    }
    const t = document.createElement('template');
    t.innerHTML = html.trim();
    const el = t.content.firstElementChild ?? document.createElement('div');
    el.dataset.key = key;
    el.__html = html;
    return el;
  });
  for (const el of existing.values()) el.remove();
  wanted.forEach((el, i) => {
    if (container.children[i] !== el) container.insertBefore(el, container.children[i] ?? null);
  });
}

function isNearBottom(el) {
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}

/** The message the channel opens at: the first critical alert (🔴 header), else the oldest message. */
function anchorTarget(list) {
  const msgs = [...list.children].filter((el) => el.classList.contains('message') && !el.classList.contains('ephemeral') && !el.classList.contains('notice'));
  return msgs.find((el) => (el.querySelector('.bk-header')?.textContent ?? '').startsWith('🔴')) ?? msgs[0];
}

/** The sidebar's channels (the cluster's and those its routing rules send alerts to), the shown one marked. */
function renderChannels() {
  const d = ui.data;
  const html = d.channels
    .map((c) => {
      const on = ui.tab === 'channel' && c.id === d.channel.id;
      const count = c.alerts ? ` <span class="count" title="alerts in this channel">${c.alerts}</span>` : '';
      return `<div class="channel-link${on ? ' active' : ''}" data-testid="channel-link" data-channel="${escapeHtml(c.name)}" data-channel-id="${escapeHtml(c.id)}" role="button" tabindex="0"${on ? ' aria-current="page"' : ''}># ${escapeHtml(c.name)}${count}</div>`;
    })
    .join('');
  const nav = $('#channel-list');
  if (nav.__html !== html) {
    nav.innerHTML = html;
    nav.__html = html;
  }
  $('#channel-title').textContent = `# ${d.channel.name}`;
  $('#channel-topic').textContent = d.channel.topic ?? '';
  $('#thread-channel').textContent = `# ${d.channel.name}`;
  $('#composer-input').placeholder = `Message #${d.channel.name} — try /tokens status ${d.info?.cluster ?? ''}`.trim();
  document.title = `#${d.channel.name} · tokenwatch sandbox`;
}

/** Shows another channel: its timeline from the top (first critical alert), no thread open. */
async function openChannel(id) {
  if (ui.channel !== id || ui.tab !== 'channel') {
    ui.channel = id;
    ui.openThread = null;
    ui.anchored = true;
    ui.firstRender = true;
  }
  await openTab('channel');
}

function render() {
  const d = ui.data;
  if (!d) return;
  renderChannels();
  const eph = d.ephemerals.filter((e) => !ui.dismissed.has(`e${e.ts}`));
  let answered = false;
  for (const e of eph) {
    if (!ui.seenEphemerals.has(e.ts)) {
      ui.seenEphemerals.add(e.ts);
      if (!ui.firstRender && e.threadTs) ui.openThread = e.threadTs;
      if (!ui.firstRender && !e.threadTs) answered = true;
    }
  }
  const freshNotice = d.notices.some((n) => !ui.seenNotices.has(n.id));
  for (const n of d.notices) ui.seenNotices.add(n.id);
  // Channel timeline: top-level messages, ephemerals outside threads, notices.
  const items = [
    ...d.messages.map((m) => ({ ...m, kind: 'message', order: tsMs(m.ts) })),
    ...eph.filter((e) => !e.threadTs).map((e) => ({ ...e, kind: 'ephemeral', key: `e${e.ts}`, order: tsMs(e.ts) })),
    ...d.notices.filter((n) => !ui.dismissed.has(`n${n.id}`)).map((n) => ({ ...n, kind: 'notice', key: `n${n.id}`, order: n.at })),
  ].sort((a, b) => a.order - b.order);
  const list = $('#messages');
  // Follow the bottom like Slack once you act (sent something, an answer for you arrived) or scrolled yourself.
  if (ui.scrollToBottom || answered || (freshNotice && !ui.firstRender)) ui.anchored = false;
  const stick = !ui.anchored && (ui.scrollToBottom || answered || freshNotice || isNearBottom(list));
  ui.scrollToBottom = false;
  patchList(
    list,
    items.length
      ? items.map((m) => ({ key: m.key ?? `m${m.ts}`, html: messageHtml(m, { showReplies: true }) }))
      : [{ key: 'empty', html: '<p class="muted" style="padding:16px">No messages yet: tokenwatch posts its alerts after the first poll.</p>' }],
  );
  const anchor = ui.anchored ? anchorTarget(list) : undefined;
  if (anchor) list.scrollTop += anchor.getBoundingClientRect().top - list.getBoundingClientRect().top - 8;
  else if (stick) list.scrollTop = list.scrollHeight;

  const thread = $('#thread');
  const parent = ui.openThread && d.messages.find((m) => m.ts === ui.openThread);
  if (parent) {
    const body = $('#thread-body');
    const stickThread = thread.hidden || isNearBottom(body);
    const replies = [
      ...parent.replies.map((m) => ({ ...m, kind: 'message', order: tsMs(m.ts) })),
      ...eph.filter((e) => e.threadTs === parent.ts).map((e) => ({ ...e, kind: 'ephemeral', key: `e${e.ts}`, order: tsMs(e.ts) })),
    ].sort((a, b) => a.order - b.order);
    patchList(body, [
      { key: `parent${parent.ts}`, html: `<div class="thread-parent">${messageHtml({ ...parent, kind: 'message' }, { showReplies: false })}</div>` },
      { key: 'count', html: `<div class="reply-count">${parent.replies.length} ${parent.replies.length === 1 ? 'reply' : 'replies'}</div>` },
      ...replies.map((m) => ({ key: m.key ?? `m${m.ts}`, html: messageHtml(m, { showReplies: false }) })),
    ]);
    thread.hidden = false;
    if (stickThread) body.scrollTop = body.scrollHeight;
  } else {
    thread.hidden = true;
  }

  renderHome();

  const banner = $('#status-banner');
  banner.hidden = d.slackReady;
  if (!d.slackReady) banner.textContent = 'The tokenwatch Slack app is not running in this sandbox: you see the channel, but commands and buttons get no answer.';
  ui.firstRender = false;
}

/** The Home tab: the view the bot published to this user with views.publish, rendered like a message's blocks. */
function renderHome() {
  const home = ui.tab === 'home';
  $('#home').hidden = !home;
  $('main.channel:not(.home)').hidden = home;
  $('#home-link').classList.toggle('active', home);
  if (home) $('#thread').hidden = true;
  const view = ui.data?.home;
  const html = view?.blocks?.length
    ? `<div class="bk-blocks">${renderBlocks(view.blocks, renderCtx())}</div>`
    : '<p class="muted" style="padding:16px">Opening Home… tokenwatch publishes it when you open the tab.</p>';
  const body = $('#home-body');
  if (body.__html !== html) {
    body.innerHTML = html;
    body.__html = html;
  }
}

async function openTab(tab) {
  ui.tab = tab;
  render();
  if (tab === 'home') await post('/api/home', { user: ui.me });
  await refresh();
}

function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function renderCluster() {
  const c = ui.cluster;
  if (!c) return;
  $('#cluster').innerHTML = c.workloads
    .map(
      (w) =>
        `<div class="workload" data-workload="${escapeHtml(`${w.kind}/${w.namespace}/${w.name}`)}"><div class="workload-head"><span>${escapeHtml(w.kind)} ${escapeHtml(w.name)}</span>` +
        `<span class="${w.rolling ? 'rolling' : ''}">${w.rolling ? 'rolling ' : ''}${w.updated}/${w.desired}</span></div>` +
        `<ul class="pods">${w.pods
          .map((p) => {
            const a = ui.now - p.startedAt;
            return `<li class="${a < 3600_000 ? 'fresh' : ''}" title="${escapeHtml(p.node ?? '')}"><span>${escapeHtml(p.name)}</span><span>${age(a)}</span></li>`;
          })
          .join('')}</ul></div>`,
    )
    .join('');
}

function renderClock() {
  const t = new Date(ui.now).toISOString();
  $('#sim-time').textContent = `${t.slice(0, 10)} ${t.slice(11, 19)} UTC`;
  if (ui.data) $('#sim-speed').textContent = `×${ui.data.speed}`;
}

let refreshing = null;
let again = false;
async function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      const r = await fetch(`/api/state?user=${encodeURIComponent(ui.me)}${ui.channel ? `&channel=${encodeURIComponent(ui.channel)}` : ''}`);
      ui.data = await r.json();
      // `?channel=` may name the channel (net-alerts) or be unknown: the server answers with the one it shows.
      ui.channel = ui.data.channel.id;
      ui.now = ui.data.now;
      render();
      renderClock();
    } while (again);
  })().finally(() => {
    refreshing = null;
  });
  return refreshing;
}

async function refreshCluster() {
  const r = await fetch('/api/cluster');
  ui.cluster = await r.json();
  renderCluster();
}

async function post(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
}

/** Shows a Block Kit confirm dialog; resolves true when confirmed. */
function confirmDialog(c) {
  return new Promise((resolve) => {
    const dlg = $('#dialog');
    $('#dialog-title').textContent = c.title;
    $('#dialog-text').innerHTML = c.textHtml;
    const ok = $('#dialog-confirm');
    const deny = $('#dialog-deny');
    ok.textContent = c.confirm;
    deny.textContent = c.deny;
    ok.className = `bk-button ${c.style === 'danger' ? 'bk-danger' : 'bk-primary'}`;
    dlg.hidden = false;
    ok.focus();
    const done = (v) => {
      dlg.hidden = true;
      ok.onclick = deny.onclick = dlg.onkeydown = null;
      resolve(v);
    };
    ok.onclick = () => done(true);
    deny.onclick = () => done(false);
    dlg.onkeydown = (e) => {
      if (e.key === 'Escape') done(false);
    };
  });
}

async function onButton(btn) {
  const msg = btn.closest('.message');
  if (!msg) return;
  if (btn.dataset.confirm) {
    const ok = await confirmDialog(JSON.parse(btn.dataset.confirm));
    if (!ok) return;
  }
  const ephemeral = msg.dataset.ephemeral === '1';
  btn.disabled = true;
  try {
    const r = await post('/api/action', {
      user: ui.me,
      channel: ui.data.channel.id,
      ts: msg.dataset.ts,
      ephemeral,
      actionId: btn.dataset.actionId,
      blockId: btn.dataset.blockId,
      value: btn.dataset.value ?? '',
      text: btn.dataset.text ?? '',
      selected: btn.dataset.selected === '1',
    });
    // Follow the conversation: a click on an alert opens its thread, where approvals and progress go.
    if (r.ok && !ephemeral && !msg.dataset.threadTs) ui.openThread = msg.dataset.ts;
    if (r.ok && msg.dataset.threadTs) ui.openThread = msg.dataset.threadTs;
  } finally {
    btn.disabled = false;
    await refresh();
  }
}

document.addEventListener('click', (e) => {
  const target = e.target instanceof Element ? e.target : null;
  if (!target) return;
  const btn = target.closest('button.bk-button[data-action-id]');
  if (btn && !btn.closest('.dialog')) {
    e.preventDefault();
    void onButton(btn);
    return;
  }
  const open = target.closest('[data-open-thread]');
  if (open) {
    ui.openThread = open.getAttribute('data-open-thread');
    render();
    return;
  }
  const dismiss = target.closest('[data-dismiss]');
  if (dismiss) {
    ui.dismissed.add(dismiss.getAttribute('data-dismiss'));
    render();
  }
});

// Scrolling the channel yourself ends the opening position (wheel, touch, keys, the scrollbar).
for (const type of ['wheel', 'touchstart', 'keydown', 'pointerdown']) $('#messages').addEventListener(type, () => (ui.anchored = false), { passive: true });
$('#home-link').addEventListener('click', () => void openTab('home'));
$('#channel-list').addEventListener('click', (e) => {
  const link = e.target instanceof Element ? e.target.closest('[data-channel-id]') : null;
  if (link) void openChannel(link.getAttribute('data-channel-id'));
});

$('#thread-close').addEventListener('click', () => {
  ui.openThread = null;
  render();
});

$('#composer').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = $('#composer-input');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  input.disabled = true;
  ui.scrollToBottom = true;
  try {
    await post(text.startsWith('/') ? '/api/command' : '/api/message', { user: ui.me, text, channel: ui.data.channel.id });
  } finally {
    input.disabled = false;
    input.focus();
    await refresh();
  }
});

function setupUsers() {
  const sel = $('#user-switcher');
  sel.innerHTML = ui.data.users.map((u) => `<option value="${escapeHtml(u.id)}">${escapeHtml(`${u.name} (${u.role})`)}</option>`).join('');
  if (!ui.data.users.some((u) => u.id === ui.me)) ui.me = ui.data.users[0].id;
  sel.value = ui.me;
  sel.addEventListener('change', () => {
    ui.me = sel.value;
    localStorage.setItem('tokenwatch-sandbox-user', ui.me);
    ui.seenEphemerals = new Set();
    ui.firstRender = true;
    void (ui.tab === 'home' ? openTab('home') : refresh());
  });
}

function connect() {
  const es = new EventSource('/api/events');
  es.addEventListener('slack', () => void refresh());
  es.addEventListener('notice', () => void refresh());
  es.addEventListener('cluster', () => void refreshCluster());
  es.addEventListener('tick', (e) => {
    ui.now = JSON.parse(e.data).now;
    renderClock();
    renderCluster();
  });
  es.addEventListener('hello', () => {
    void refresh();
    void refreshCluster();
  });
}

await refresh();
setupUsers();
await refreshCluster();
connect();
document.body.dataset.ready = '1';
