// mmserve's status page: polls the server's own JSON once a second and draws it.
//   /ui/access.json    which keys the server wants (asked for before anything that needs one)
//   /v2/models/stats   every model version: state, memory, queues, breaker, workers, latency
//   /v2/devices        each memory domain's budget and who holds it
//   /v2/events?after=N what happened since the last event this page saw
// Request rate, errors, p50/p99 and tokens/s are over the last minute as the server keeps them
// (`last_minute`: a page opened after the traffic shows it). Everything from the server is set
// as text, never parsed as HTML.
'use strict';

const POLL_MS = 1000;
const MAX_EVENTS = 200;

const page = {
  access: null,  // {api_key, admin_key}: whether each is needed
  apiKey: sessionStorage.getItem('mmserve.apiKey') || '',
  adminKey: sessionStorage.getItem('mmserve.adminKey') || '',
  lastSeq: 0,
  events: [],
  rows: new Map(),     // "name/version" -> {tr, cells, button}
  timer: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// fetch with the key the route needs; JSON back (null for an empty body).
async function api(path, options = {}, admin = false) {
  const key = admin ? page.adminKey || page.apiKey : page.apiKey || page.adminKey;
  const headers = Object.assign({}, options.headers || {});
  if (key) headers.Authorization = 'Bearer ' + key;
  const res = await fetch(path, Object.assign({}, options, { headers, cache: 'no-store' }));
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    body = null;
  }
  if (!res.ok) {
    const message = body && body.error ? body.error : res.status + ' ' + res.statusText;
    throw new HttpError(res.status, message);
  }
  return body;
}

// ---- formatting ---------------------------------------------------------------------------

function mib(bytes) {
  if (bytes === null || bytes === undefined) return '–';
  const m = bytes / 1048576;
  if (m >= 1024) return (m / 1024).toFixed(2) + ' GiB';
  return (m >= 10 ? m.toFixed(0) : m.toFixed(1)) + ' MiB';
}

function seconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  if (s < 0.001) return (s * 1000).toFixed(2) + ' ms';
  if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 1 : 0) + ' ms';
  return s.toFixed(s < 10 ? 2 : 1) + ' s';
}

// The keep-alive countdown, as `mmserve ps` shows it: "4m 10s", "never", "–" (not loaded).
function unloadsIn(keepAlive) {
  if (!keepAlive || keepAlive.seconds === null || keepAlive.seconds === undefined) return 'never';
  const left = keepAlive.expires_in_s;
  if (left === null || left === undefined) return '–';
  const s = Math.floor(left);
  if (s >= 3600) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  if (s >= 60) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  return s + 's';
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  return Math.floor(s / 3600) + ' h ago';
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

// ---- models -------------------------------------------------------------------------------

const COLUMNS = ['model', 'state', 'where', 'memory', 'queued', 'inflight', 'breaker', 'workers',
  'rate', 'errors', 'p50', 'p99', 'tokens', 'unloads', 'last', 'action'];

function rowFor(key) {
  let row = page.rows.get(key);
  if (row) return row;
  const tr = el('tr');
  tr.dataset.model = key;
  const cells = {};
  for (const c of COLUMNS) {
    cells[c] = el('td', ['rate', 'errors', 'p50', 'p99', 'tokens', 'inflight', 'workers'].includes(c) ?
      'num' : '');
    cells[c].dataset.col = c;
    tr.append(cells[c]);
  }
  const button = el('button');
  button.type = 'button';
  button.hidden = true;
  cells.action.append(button);
  row = { tr, cells, sig: {}, button };
  page.rows.set(key, row);
  return row;
}

// Replaces a cell's content only when it changed, so nodes (and a click under way) survive.
function setCell(row, col, sig, build) {
  if (row.sig[col] === sig) return;
  row.sig[col] = sig;
  const td = row.cells[col];
  td.replaceChildren(...[].concat(build()));
}

function canAdmin() {
  return page.access && (!page.access.admin_key || page.adminKey !== '');
}

function drawModel(s) {
  const m = s.mmserve || {};
  const key = s.name + '/' + s.version;
  const row = rowFor(key);
  const labels = m.labels || [];
  setCell(row, 'model', s.name + s.version + labels.join(), () => {
    const out = [el('span', 'name', s.name), el('span', 'muted', ' v' + s.version)];
    for (const l of labels) out.push(el('span', 'label', l));
    return out;
  });
  const progress = m.load_progress;
  const stateSig = [m.state, m.reason, progress && progress.done_bytes].join('|');
  setCell(row, 'state', stateSig, () => {
    const out = [el('span', 'state state-' + m.state, m.state)];
    if (progress && progress.total_bytes > 0) {
      const bar = el('progress');
      bar.max = progress.total_bytes;
      bar.value = progress.done_bytes;
      out.push(el('br'), bar, el('span', 'muted',
        ' ' + mib(progress.done_bytes) + ' of ' + mib(progress.total_bytes)));
    }
    if (m.reason) out.push(el('div', 'reason', m.reason));
    return out;
  });
  const where = (m.task || '') + ' · ' + (m.backend || '') + ' · ' + m.device;
  setCell(row, 'where', where, () => where);
  const mem = m.memory || {};
  const held = ['READY', 'UNAVAILABLE', 'FAILED'].includes(m.state) ?
    mem.resident_bytes || mem.measured_bytes || 0 : 0;
  const memText = (held ? mib(held) + ' held · ' : '') + 'est. ' + mib(mem.estimate_bytes);
  setCell(row, 'memory', memText, () => memText);
  const queued = m.queued_by_level || {};
  const levels = Object.keys(queued).sort((a, b) => a - b);
  const queuedText = levels.length ? levels.map((l) => 'L' + l + ': ' + queued[l]).join(', ') : '0';
  setCell(row, 'queued', queuedText, () => queuedText);
  const flight = (m.in_flight || 0) + ' / ' + (m.executing || 0);
  setCell(row, 'inflight', flight, () => flight);
  const breaker = m.breaker ? m.breaker.state : '–';
  const opened = m.breaker ? m.breaker.times_opened : 0;
  setCell(row, 'breaker', breaker + opened, () => {
    const span = el('span', 'breaker-' + breaker, breaker);
    if (m.breaker && m.breaker.reason) span.title = m.breaker.reason;
    return opened ? [span, el('span', 'muted', ' (opened ' + opened + '×)')] : [span];
  });
  const workers = m.workers || [];
  // Watchdog restarts of its instances, and restarts of its isolated worker after any exit.
  const restarts = workers.reduce((a, w) => a + (w.restarts || 0), 0) +
    ((m.counters && m.counters.worker_restarts) || 0);
  const workerText = m.execution === 'inline' ? 'inline' :
    workers.length ? workers.length + (restarts ? ' (' + restarts + ' restarts)' : '') : '–';
  setCell(row, 'workers', workerText, () => workerText);
  const minute = m.last_minute;
  const fixed = (v) => v.toFixed(v < 10 ? 2 : 1);
  const rate = minute ? fixed(minute.rate) : '–';
  setCell(row, 'rate', rate, () => rate);
  const answered = minute && minute.requests > 0;
  const p50 = answered ? seconds(minute.p50_s) : '–';
  const p99 = answered ? seconds(minute.p99_s) : '–';
  setCell(row, 'p50', p50, () => p50);
  setCell(row, 'p99', p99, () => p99);
  const errors = minute ? String(minute.errors) : '–';
  setCell(row, 'errors', errors, () => errors);
  const tokens = minute && minute.tokens_per_s !== undefined ? fixed(minute.tokens_per_s) : '–';
  setCell(row, 'tokens', tokens, () => tokens);
  const unloads = unloadsIn(m.keep_alive);
  setCell(row, 'unloads', unloads, () => unloads);
  const last = m.last_event;
  const lastText = last ? last.kind + ' ' + ago(last.time_ms) : '–';
  setCell(row, 'last', lastText + (last ? last.message : ''), () => {
    if (!last) return '–';
    const span = el('span', 'kind kind-' + last.kind, last.kind);
    const div = el('div', 'reason', last.message);
    return [span, el('span', 'muted', ' ' + ago(last.time_ms)), div];
  });
  // FAILED: loaded, its engine given up on; unloading it (then loading) starts afresh.
  const loaded = m.state === 'READY' || m.state === 'FAILED' ||
    (m.state === 'UNAVAILABLE' && !!m.breaker);
  const busy = m.state === 'LOADING' || m.state === 'UNLOADING';
  const b = row.button;
  b.hidden = !canAdmin() || row.pending;
  b.disabled = busy;
  b.textContent = loaded ? 'Unload' : 'Load';
  b.dataset.action = loaded ? 'unload' : 'load';
  b.dataset.name = s.name;
  return row.tr;
}

function drawModels(stats) {
  const tbody = $('models').tBodies[0];
  const seen = new Set();
  const order = [];
  for (const s of stats.model_stats || []) {
    seen.add(s.name + '/' + s.version);
    order.push(drawModel(s));
  }
  for (const [key, row] of page.rows) {
    if (!seen.has(key)) {
      row.tr.remove();
      page.rows.delete(key);
    }
  }
  order.forEach((tr, i) => {
    if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
  });
}

async function onModelAction(event) {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  const { action, name } = button.dataset;
  const row = page.rows.get(button.closest('tr').dataset.model);
  button.disabled = true;
  if (row) row.pending = true;
  try {
    await api('/v2/repository/models/' + encodeURIComponent(name) + '/' + action,
      { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' }, true);
    notice('', true);
  } catch (e) {
    notice(action + ' ' + name + ': ' + e.message, true);
  } finally {
    if (row) row.pending = false;
    button.disabled = false;
    poll();
  }
}

// ---- memory and events --------------------------------------------------------------------

function drawDevices(body) {
  const out = [];
  for (const d of body.devices || []) {
    const div = el('div', 'device');
    const budget = d.budget_bytes;
    const title = budget ?
      d.domain + ': ' + mib(d.used_bytes) + ' of the ' + mib(budget) + ' budget (' +
        Math.round((100 * d.used_bytes) / budget) + '%)' :
      d.domain + ': ' + mib(d.used_bytes) + ' held; the budget is read at its first load';
    div.append(el('div', '', title));
    const bar = el('div', 'bar');
    if (budget && d.used_bytes > budget) bar.classList.add('full');
    let left = 0;
    for (const h of d.holders || []) {
      const width = budget ? (100 * h.bytes) / budget : 0;
      const seg = el('span');
      seg.style.left = Math.min(left, 100) + '%';
      seg.style.width = Math.max(0, Math.min(width, 100 - left)) + '%';
      seg.title = h.model + ': ' + mib(h.bytes);
      bar.append(seg);
      left += width;
    }
    div.append(bar);
    out.push(div);
  }
  $('devices').replaceChildren(...out);
}

function drawEvents(body) {
  const fresh = body.events || [];
  if (!fresh.length) return;
  page.events.push(...fresh);
  page.lastSeq = Math.max(page.lastSeq, fresh[fresh.length - 1].seq);
  if (page.events.length > MAX_EVENTS) page.events.splice(0, page.events.length - MAX_EVENTS);
  const items = [];
  for (let i = page.events.length - 1; i >= 0; i--) {
    const e = page.events[i];
    const li = el('li');
    li.append(el('span', 'muted', clock(e.time_ms) + ' '), el('span', 'kind kind-' + e.kind, e.kind));
    if (e.model) li.append(' ', el('span', 'name', e.model), el('span', 'muted', ' v' + e.version));
    if (e.message) li.append(' — ' + e.message);
    items.push(li);
  }
  $('events').replaceChildren(...items);
}

// ---- keys and polling ---------------------------------------------------------------------

// A sticky notice (a failed load or unload) stays until the next action; others until the next
// successful poll.
function notice(text, sticky = false) {
  const n = $('notice');
  if (!text && n.dataset.sticky && !sticky) return;
  n.textContent = text;
  n.hidden = !text;
  if (sticky || !text) n.dataset.sticky = sticky && text ? '1' : '';
}

function drawKeyFields() {
  $('api-key-field').hidden = !page.access.api_key;
  $('admin-key-field').hidden = !page.access.admin_key;
  $('keys-save').hidden = !page.access.api_key && !page.access.admin_key;
  $('api-key').value = page.apiKey;
  $('admin-key').value = page.adminKey;
}

function onKeys(event) {
  event.preventDefault();
  page.apiKey = $('api-key').value.trim();
  page.adminKey = $('admin-key').value.trim();
  sessionStorage.setItem('mmserve.apiKey', page.apiKey);
  sessionStorage.setItem('mmserve.adminKey', page.adminKey);
  poll();
}

async function poll() {
  clearTimeout(page.timer);
  page.timer = setTimeout(poll, POLL_MS);
  if (page.access.api_key && !page.apiKey && !page.adminKey) {
    notice('This server needs an API key: enter it above.');
    return;
  }
  try {
    const [stats, devices, events] = await Promise.all([
      api('/v2/models/stats'), api('/v2/devices'), api('/v2/events?after=' + page.lastSeq)]);
    drawModels(stats);
    drawDevices(devices);
    drawEvents(events);
    $('updated').textContent = 'updated ' + clock(Date.now());
    notice('');
  } catch (e) {
    notice(e.status === 401 || e.status === 403 ?
      'The server refused the key (' + e.message + '): enter it above.' :
      'Cannot reach the server: ' + e.message);
  }
}

async function start() {
  $('keys').addEventListener('submit', onKeys);
  $('models').tBodies[0].addEventListener('click', onModelAction);
  try {
    page.access = await api('/ui/access.json');
    const server = await fetch('/v2/health/live').then((r) => (r.ok ? 'live' : 'not live'));
    $('server').textContent = location.host + ' · ' + server;
  } catch (e) {
    notice('Cannot reach the server: ' + e.message);
    setTimeout(start, 2000);
    return;
  }
  drawKeyFields();
  poll();
}

document.addEventListener('DOMContentLoaded', start);
