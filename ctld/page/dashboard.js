// dashboard.js — the allocctld page: every process of this host grouped by service, a chart
// per selected process (the memory split stacked, RSS as a line, events as markers), all from
// the daemon's own history (/api/history, /api/events), so a reload loses nothing. Nothing
// is loaded from anywhere but the daemon; untrusted text (process names, event text) only
// ever goes into textContent.
'use strict';

const FIG = ['in_use', 'cached', 'fragmented', 'free_resident', 'metadata', 'non_alloc', 'rss', 'reclaimable'];
const STACK = ['in_use', 'cached', 'fragmented', 'free_resident', 'metadata', 'non_alloc'];
const FIG_COLOR = {
  in_use: '#3b6fd4', cached: '#41a6a0', fragmented: '#c9a227', free_resident: '#e39b3b',
  metadata: '#9a6fc9', non_alloc: '#b9bfca', rss: '#1d2330', reclaimable: '#0b6e3a',
};
const EVENT_COLOR = {
  trim: '#2d8a4e', release: '#2d8a4e', flush: '#2d8a4e', set: '#3b6fd4', revert: '#3b6fd4',
  reload: '#677085', start: '#677085', exit: '#677085', daemon: '#b3261e', failed: '#b3261e',
  policy: '#9a3fb0',
};
const FINE_MS = 15 * 60 * 1000;

const S = {
  instance: null,        // the daemon's identity: started_ms/pid (a change is a restart)
  daemon: null,
  labels: {},
  procs: new Map(),      // key pid:started_ms -> process
  events: [],
  lastSeq: 0,
  lastT: 0,              // newest sample time seen (fine tier)
  range: 15 * 60 * 1000,
  selected: new Set(),   // pids charted
  sort: { key: 'rss', dir: -1 },
  group: 'exe',          // the table's groups: exe (service), profile or uid (user)
  filter: '',
  showExited: true,
  connected: false,
  downSince: 0,
  restarts: 0,
  errors: [],
  charts: new Map(),     // pid -> {card, canvas, markers:[], drawn}
  coarseAt: 0,
};
window.allocDashboard = S;

// ---- formatting ------------------------------------------------------------------------
function fmtBytes(v) {
  if (v == null) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(v < 10 ? 2 : 1) : String(v)) + ' ' + u[i];
}
function fmtClock(ms, secs) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return p(d.getHours()) + ':' + p(d.getMinutes()) + (secs ? ':' + p(d.getSeconds()) : '');
}
function fmtAge(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  if (s < 172800) return (s / 3600).toFixed(1) + ' h';
  return Math.round(s / 86400) + ' d';
}
// Stable colour of a service: a slot of a palette of distinct colours chosen by a hash of
// its name (FNV-1a); when two services of the host hash to one slot, the one later in name
// order takes the next free slot. Colours are handed out in name order when the page loads
// and then never change while it stays open, whatever comes and goes.
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#79706e', '#17becf', '#bcbd22'];
const colors = new Map();
function fnv(name) {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return h;
}
function serviceColor(name) {
  let c = colors.get(name);
  if (c) return c;
  const used = new Set(colors.values());
  let slot = fnv(name) % PALETTE.length;
  for (let k = 0; k < PALETTE.length && used.has(PALETTE[slot]); k++) slot = (slot + 1) % PALETTE.length;
  c = PALETTE[slot];
  colors.set(name, c);
  return c;
}
function assignColors() {
  [...new Set([...S.procs.values()].map((q) => q.exe))].sort().forEach(serviceColor);
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

// ---- data ------------------------------------------------------------------------------
async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) throw new Error(url + ': HTTP ' + r.status);
  return r.json();
}

function keyOf(p) { return p.pid + ':' + p.started_ms; }

// Merge the samples of one process from an /api/history answer into series (t[], v{}).
// Time the daemon did not sample (it was down or restarted) becomes a gap (a null value),
// so the chart does not draw a line across it.
function mergeSamples(dst, p) {
  if (p.t0 == null) return;
  const n = p.series.rss.length;
  for (let i = 0; i < n; i++) {
    const t = p.t0 + i * p.res_ms;
    const last = dst.t.length ? dst.t[dst.t.length - 1] : null;
    if (last != null && t <= last) continue;
    if (last != null && t - last > 1.5 * Math.max(dst.res || 0, p.res_ms)) {
      dst.t.push(last + (dst.res || p.res_ms));
      for (const f of FIG) dst.v[f].push(null);
    }
    dst.t.push(t);
    for (const f of FIG) dst.v[f].push(p.series[f][i]);
  }
  dst.res = p.res_ms;
}
function emptySeries() {
  const v = {};
  for (const f of FIG) v[f] = [];
  return { t: [], v };
}
function trimSeries(s, from) {
  let k = 0;
  while (k < s.t.length && s.t[k] < from) k++;
  if (!k) return;
  s.t.splice(0, k);
  for (const f of FIG) s.v[f].splice(0, k);
}

function upsert(p) {
  const k = keyOf(p);
  let q = S.procs.get(k);
  if (!q) {
    q = { key: k, fine: emptySeries(), coarse: null, full: false };
    S.procs.set(k, q);
  }
  for (const f of ['pid', 'exe', 'profile', 'uid', 'started_ms', 'exited_ms', 'exit_reason', 'live', 'truncated', 'fine_first_ms', 'coarse_first_ms'])
    q[f] = p[f];
  return q;
}

function latest(q) {
  const s = q.fine;
  for (let i = s.t.length - 1; i >= 0; i--)
    if (s.v.rss[i] != null) {
      const o = {};
      for (const f of FIG) o[f] = s.v[f][i];
      return o;
    }
  return null;
}

function idOf(d) { return d.started_ms + '/' + d.pid; }

// Take the samples of an answer: they replace what the page has when they reach back as
// far (the daemon has it all), else (a restarted daemon) only the newer ones are appended.
function absorb(q, which, p) {
  if (p.t0 == null) return;
  const s = q[which];
  if (!s || !s.t.length || p.t0 <= s.t[0]) q[which] = emptySeries();
  mergeSamples(q[which], p);
}

function evKey(e) { return e.kind + '/' + e.pid + '/' + e.t + '/' + e.what; }

// Everything from the daemon: every process's last 15 minutes (averaged to ~10 s for the
// table) and, for the charted ones, full resolution over the chosen range. Run at the
// first load, after the daemon was unreachable, and when it restarted (a new pid or start
// time): then what the page already shows stays, the new daemon's history is added after
// it with a marker where the restart happened.
async function loadAll() {
  const h = await getJSON('/api/history?res=fine&points=90&since=-' + FINE_MS);
  const restart = S.instance != null && S.instance !== idOf(h.daemon);
  S.instance = idOf(h.daemon);
  S.daemon = h.daemon;
  S.labels = h.labels;
  const seen = new Set();
  for (const p of h.processes) {
    const q = upsert(p);
    seen.add(q.key);
    absorb(q, 'fine', p);
    if (restart) q.full = false;
  }
  for (const q of S.procs.values())
    if (!seen.has(q.key) && q.live) { q.live = false; q.exited_ms = q.exited_ms || Date.now(); q.exit_reason = q.exit_reason || 'not seen by the restarted daemon'; }
  S.lastT = h.daemon.now_ms - h.daemon.sample_ms;
  const ev = await getJSON('/api/events');
  if (restart) {
    S.restarts++;
    S.events.push({ seq: 0, t: h.daemon.started_ms, pid: null, exe: '', kind: 'daemon', who: 'page', what: 'the daemon restarted: its history starts again here', bytes: 0, ok: true });
    const have = new Set(S.events.map(evKey));
    for (const e of ev.events) if (!have.has(evKey(e))) S.events.push(e);
    S.events.sort((a, b) => a.t - b.t);
    showBanner('The daemon restarted at ' + fmtClock(h.daemon.started_ms, true) + ' (now pid ' + h.daemon.pid + '): the charts go on with its new history; what it did not sample is a gap.', 'info', 10000);
  } else {
    const have = new Set(S.events.map(evKey));
    for (const e of ev.events) if (!have.has(evKey(e))) S.events.push(e);
  }
  S.lastSeq = ev.last_seq;
  assignColors();
  if (!S.selected.size) defaultSelection();
  await loadCharted(true);
  return restart;
}

function defaultSelection() {
  const live = [...S.procs.values()].filter((q) => q.live);
  live.sort((a, b) => ((latest(b) || {}).rss || 0) - ((latest(a) || {}).rss || 0));
  for (const q of live.slice(0, 4)) S.selected.add(q.pid);
}

// Full-resolution history of the charted processes over the range (and the coarse tier for
// ranges beyond the fine window).
async function loadCharted(force) {
  const pids = [...S.selected].filter((pid) => byPid(pid));
  if (!pids.length) return;
  const want = pids.filter((pid) => !byPid(pid).full);
  if (want.length) {
    const h = await getJSON('/api/history?res=fine&pid=' + want.join(','));
    for (const p of h.processes) {
      const q = upsert(p);
      absorb(q, 'fine', p);
      q.full = true;
    }
  }
  if (S.range > FINE_MS && (force || Date.now() - S.coarseAt > 30000 || want.length)) {
    const h = await getJSON('/api/history?res=coarse&since=-' + S.range + '&pid=' + pids.join(','));
    for (const p of h.processes) absorb(upsert(p), 'coarse', p);
    S.coarseAt = Date.now();
  }
}

function byPid(pid) {
  let best = null;
  for (const q of S.procs.values())
    if (q.pid === pid && (!best || (q.live && !best.live) || q.started_ms > best.started_ms)) best = q;
  return best;
}

// One poll: the samples since the newest we have, and the events after the last seq. A
// daemon that is not the one we talked to has restarted: everything again (loadAll).
async function poll() {
  const h = await getJSON('/api/history?res=fine&since=' + (S.lastT + 1));
  if (idOf(h.daemon) !== S.instance) return loadAll();
  S.daemon = h.daemon;
  for (const p of h.processes) {
    const q = upsert(p);
    mergeSamples(q.fine, p);
    if (q.fine.t.length) S.lastT = Math.max(S.lastT, q.fine.t[q.fine.t.length - 1]);
  }
  const ev = await getJSON('/api/events?after=' + S.lastSeq);
  if (idOf(ev.daemon) !== S.instance) return loadAll();
  for (const e of ev.events) {
    S.events.push(e);
    // an exit: the process stays on the page, greyed, until it leaves the daemon's retention
    if (e.kind === 'exit')
      for (const q of S.procs.values())
        if (q.pid === e.pid && q.live) { q.live = false; q.exited_ms = e.t; q.exit_reason = e.what; }
  }
  S.lastSeq = ev.last_seq;
  if (S.events.length > 20000) S.events.splice(0, S.events.length - 20000);
  const from = Date.now() - FINE_MS - 60000;
  for (const q of S.procs.values()) trimSeries(q.fine, from);
  // exited processes past the daemon's retention leave the page too
  for (const [k, q] of S.procs) if (!q.live && Date.now() - q.exited_ms > 86400000) S.procs.delete(k);
  await loadCharted(false);
}

// ---- connection state -------------------------------------------------------------------
let bannerTimer = 0;
function showBanner(text, cls, ms) {
  const b = document.getElementById('banner');
  b.textContent = text;
  b.className = 'banner' + (cls ? ' ' + cls : '');
  b.hidden = false;
  clearTimeout(bannerTimer);
  if (ms) bannerTimer = setTimeout(() => { b.hidden = true; }, ms);
}
function hideBanner() {
  document.getElementById('banner').hidden = true;
}

let timer = 0;
async function tick() {
  clearTimeout(timer);
  try {
    if (!S.connected) {
      const restart = await loadAll();
      if (restart) { /* loadAll said so */ }
      else if (S.downSince) showBanner('Connected again at ' + fmtClock(Date.now(), true) + '.', 'info', 5000);
      else hideBanner();
      S.connected = true;
      S.downSince = 0;
    } else {
      await poll();
    }
  } catch (e) {
    if (S.connected || !S.downSince) S.downSince = Date.now();
    S.connected = false;
    showBanner('allocctld is unreachable since ' + fmtClock(S.downSince, true) + ' (' + (e && e.message ? e.message : e) + '); retrying every 2 s. What is shown below stays.', '', 0);
  }
  render();
  // ms from navigation to the first complete view (the bench's page-load figure)
  if (S.connected && S.firstView == null) S.firstView = performance.now();
  const period = S.daemon ? Math.max(500, S.daemon.sample_ms) : 1000;
  timer = setTimeout(tick, S.connected ? period : 2000);
}

// ---- the table ----------------------------------------------------------------------------
function stateOf(q) {
  return q.live ? 'up ' + fmtAge(Date.now() - q.started_ms) : 'exited ' + fmtClock(q.exited_ms, false);
}
// The group a process is in: its service (run name), the profile the daemon applied to it,
// or its user.
function groupOf(q) {
  if (S.group === 'profile') return q.profile || '';
  if (S.group === 'uid') return 'uid ' + q.uid;
  return q.exe;
}
function groupLabel(name) {
  if (S.group === 'profile') return name ? 'profile ' + name : 'no profile';
  return name || '?';
}
const NAME_KEYS = ['pid', 'exe', 'profile', 'uid', 'state'];
function sortValue(q, key) {
  if (key === 'pid' || key === 'uid') return q[key];
  if (key === 'exe') return q.exe;
  if (key === 'profile') return q.profile || '';
  if (key === 'state') return q.live ? q.started_ms : -q.exited_ms;
  const l = latest(q);
  return l ? l[key] || 0 : -1;
}
function visible(q) {
  if (!S.showExited && !q.live) return false;
  if (!S.filter) return true;
  const f = S.filter.toLowerCase();
  return q.exe.toLowerCase().includes(f) || (q.profile || '').toLowerCase().includes(f) || String(q.pid) === f || String(q.pid).startsWith(f) || ('uid ' + q.uid) === f || String(q.uid) === f;
}

function renderTable() {
  const tbody = document.querySelector('#procs tbody');
  const groups = new Map();
  for (const q of S.procs.values()) {
    if (!visible(q)) continue;
    const k = groupOf(q);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(q);
  }
  const { key, dir } = S.sort;
  const cmp = (a, b) => {
    const x = sortValue(a, key), y = sortValue(b, key);
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.pid - b.pid;
  };
  const gsum = (list, f) => list.reduce((s, q) => s + ((latest(q) || {})[f] || 0), 0);
  const names = [...groups.keys()];
  names.sort((a, b) => {
    if (NAME_KEYS.includes(key)) return dir * (a < b ? -1 : a > b ? 1 : 0);
    return dir * (gsum(groups.get(a), key) - gsum(groups.get(b), key)) || (a < b ? -1 : 1);
  });
  const frag = document.createDocumentFragment();
  let nproc = 0, nlive = 0;
  for (const name of names) {
    const list = groups.get(name).sort(cmp);
    const g = el('tr', 'group');
    // a service's own colour; profiles and users are not services: a neutral one
    g.style.setProperty('--svc', S.group === 'exe' ? serviceColor(name) : '#8a93a6');
    g.dataset.group = name;
    const td = el('td');
    td.colSpan = document.querySelectorAll('#procs thead th').length;
    td.appendChild(el('span', 'swatch'));
    td.appendChild(el('span', 'gname', groupLabel(name)));
    const live = list.filter((q) => q.live).length;
    td.appendChild(el('span', 'gsum', list.length + ' process' + (list.length === 1 ? '' : 'es') + (live !== list.length ? ' (' + live + ' running)' : '') + ' · in use ' + fmtBytes(gsum(list, 'in_use')) + ' · RSS ' + fmtBytes(gsum(list, 'rss'))));
    td.title = 'chart every running process of ' + groupLabel(name);
    td.addEventListener('click', () => { for (const q of list) if (q.live) S.selected.add(q.pid); saveHash(); loadCharted(false).then(render, () => {}); });
    g.appendChild(td);
    frag.appendChild(g);
    for (const q of list) {
      nproc++;
      if (q.live) nlive++;
      const l = latest(q) || {};
      const tr = el('tr', 'proc' + (S.selected.has(q.pid) ? ' selected' : '') + (q.live ? '' : ' exited'));
      tr.dataset.pid = q.pid;
      tr.style.setProperty('--svc', serviceColor(q.exe));
      const cells = [q.pid, q.exe, q.profile || '–', q.uid, stateOf(q), fmtBytes(l.in_use), fmtBytes(l.cached), fmtBytes(l.fragmented), fmtBytes(l.free_resident), fmtBytes(l.reclaimable), fmtBytes(l.non_alloc), fmtBytes(l.rss)];
      for (const c of cells) tr.appendChild(el('td', null, String(c)));
      // grouped by profile or user, the service's colour is on its name
      if (S.group !== 'exe') tr.children[1].prepend(el('span', 'swatch'));
      if (!q.live && q.exit_reason) tr.children[4].title = q.exit_reason;
      const tt = el('td', 'trend');
      const cv = el('canvas');
      tt.appendChild(cv);
      tr.appendChild(tt);
      tr.addEventListener('click', () => toggle(q.pid));
      frag.appendChild(tr);
      tr._spark = [cv, q];
    }
  }
  tbody.replaceChildren(frag);
  for (const tr of tbody.querySelectorAll('tr.proc')) drawSpark(tr._spark[0], tr._spark[1]);
  for (const th of document.querySelectorAll('#procs th[data-sort]'))
    th.className = th.dataset.sort === key ? (dir > 0 ? 'asc' : 'desc') : '';
  document.getElementById('empty').hidden = S.procs.size > 0;
  const what = { exe: ['service', 'services'], profile: ['profile', 'profiles'], uid: ['user', 'users'] }[S.group];
  document.getElementById('summary').textContent = nlive + ' running, ' + (nproc - nlive) + ' exited shown · ' + names.length + ' ' + what[names.length === 1 ? 0 : 1];
}

function drawSpark(cv, q) {
  const w = 140, h = 22, dpr = window.devicePixelRatio || 1;
  cv.width = w * dpr; cv.height = h * dpr;
  const g = cv.getContext('2d');
  g.scale(dpr, dpr);
  const s = q.fine, now = S.lastT || Date.now();
  // 15 minutes, or from the first sample while there is less (at least a minute)
  const from = Math.max(now - FINE_MS, Math.min(now - 60000, s.t.length ? s.t[0] : now));
  const span = now - from;
  let max = 1;
  for (const v of s.v.rss) if (v != null && v > max) max = v;
  g.strokeStyle = serviceColor(q.exe);
  g.fillStyle = g.strokeStyle;
  g.lineWidth = 1.2;
  g.beginPath();
  let pen = false;
  for (let i = 0; i < s.t.length; i++) {
    const v = s.v.rss[i];
    if (v == null || s.t[i] < from) { pen = false; continue; }
    const x = (s.t[i] - from) / span * (w - 2) + 1, y = h - 2 - v / max * (h - 4);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  }
  g.stroke();
}

function toggle(pid) {
  if (S.selected.has(pid)) S.selected.delete(pid);
  else S.selected.add(pid);
  saveHash();
  loadCharted(false).then(render, () => render());
}

// ---- charts ------------------------------------------------------------------------------
function chartData(q) {
  // coarse samples before the fine window, then the fine ones
  const out = emptySeries();
  const fineFrom = q.fine.t.length ? q.fine.t[0] : Infinity;
  if (S.range > FINE_MS && q.coarse)
    for (let i = 0; i < q.coarse.t.length; i++) {
      if (q.coarse.t[i] >= fineFrom) break;
      out.t.push(q.coarse.t[i]);
      for (const f of FIG) out.v[f].push(q.coarse.v[f][i]);
    }
  for (let i = 0; i < q.fine.t.length; i++) {
    out.t.push(q.fine.t[i]);
    for (const f of FIG) out.v[f].push(q.fine.v[f][i]);
  }
  return out;
}

function niceStep(span, target) {
  const raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}
function timeStep(span) {
  const steps = [10e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 10800e3, 21600e3];
  for (const s of steps) if (span / s <= 8) return s;
  return 43200e3;
}
function byteStep(max) {
  const units = [1, 1024, 1048576, 1073741824, 1099511627776];
  let u = units[0];
  for (const x of units) if (max / x >= 2) u = x;
  return niceStep(max / u, 4) * u;
}

// Diagonal lines in the reclaimable colour, see-through between them (one pattern per
// context: patterns belong to the canvas that made them).
function hatch(g) {
  const t = document.createElement('canvas');
  t.width = t.height = 8;
  const h = t.getContext('2d');
  h.strokeStyle = FIG_COLOR.reclaimable;
  h.lineWidth = 2;
  h.beginPath(); h.moveTo(-2, 10); h.lineTo(10, -2); h.moveTo(-2, 2); h.lineTo(2, -2); h.moveTo(6, 10); h.lineTo(10, 6); h.stroke();
  return g.createPattern(t, 'repeat');
}

function ensureCard(q) {
  let c = S.charts.get(q.pid);
  if (c) return c;
  const card = el('div', 'card');
  card.dataset.pid = q.pid;
  const h2 = el('h2');
  h2.appendChild(el('span', 'title', q.exe));
  h2.appendChild(el('span', 'sub'));
  const close = el('button', 'close', '×');
  close.title = 'stop charting this process';
  close.addEventListener('click', () => toggle(q.pid));
  h2.appendChild(close);
  card.appendChild(h2);
  const canvas = el('canvas');
  canvas.setAttribute('role', 'img');
  card.appendChild(canvas);
  const legend = el('div', 'legend');
  for (const f of STACK) {
    const s = el('span', 'item');
    const sw = el('i');
    sw.style.background = FIG_COLOR[f];
    s.appendChild(sw);
    s.appendChild(document.createTextNode(S.labels[f] || f));
    s.dataset.series = f;
    legend.appendChild(s);
  }
  const r = el('span', 'item');
  const rl = el('i', 'line');
  rl.style.background = FIG_COLOR.rss;
  r.appendChild(rl);
  r.appendChild(document.createTextNode(S.labels.rss || 'RSS'));
  r.dataset.series = 'rss';
  legend.appendChild(r);
  const rc = el('span', 'item');
  rc.appendChild(el('i', 'hatch'));
  rc.appendChild(document.createTextNode((S.labels.reclaimable || 'reclaimable') + ' (what release and trim give back)'));
  rc.dataset.series = 'reclaimable';
  legend.appendChild(rc);
  const m = el('span', 'item');
  m.appendChild(el('i', 'marker'));
  m.appendChild(document.createTextNode('event (hover for who, what, how much)'));
  legend.appendChild(m);
  card.appendChild(legend);
  c = { card, canvas, markers: [], series: [], points: 0, q };
  canvas.addEventListener('mousemove', (ev) => hover(c, ev));
  canvas.addEventListener('mouseleave', () => { document.getElementById('tip').hidden = true; });
  S.charts.set(q.pid, c);
  return c;
}

function drawChart(c) {
  const q = c.q, cv = c.canvas;
  const W = cv.clientWidth || 560, H = cv.clientHeight || 220, dpr = window.devicePixelRatio || 1;
  cv.width = W * dpr; cv.height = H * dpr;
  const g = cv.getContext('2d');
  g.scale(dpr, dpr);
  const L = 64, R = 10, T = 14, B = 22, pw = W - L - R, ph = H - T - B;
  const now = q.live ? (S.lastT || Date.now()) + (S.daemon ? S.daemon.sample_ms : 1000) : q.exited_ms;
  const d = chartData(q);
  // the chosen range, or less while the history is shorter (at least a minute)
  const t1 = now;
  let t0 = t1 - S.range;
  if (d.t.length && d.t[0] > t0) t0 = Math.max(t0, Math.min(t1 - 60000, d.t[0] - (t1 - d.t[0]) * 0.02));
  let max = 1;
  for (let i = 0; i < d.t.length; i++) {
    if (d.t[i] < t0) continue;
    let sum = 0;
    for (const f of STACK) sum += d.v[f][i] || 0;
    max = Math.max(max, sum, d.v.rss[i] || 0);
  }
  const ystep = byteStep(max * 1.08);
  const ymax = Math.ceil(max * 1.08 / ystep) * ystep;
  const X = (t) => L + (t - t0) / (t1 - t0) * pw, Y = (v) => T + ph - v / ymax * ph;
  // grid and axes
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#677085';
  g.strokeStyle = '#e6e9ef';
  g.lineWidth = 1;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (let v = 0; v <= ymax + 1; v += ystep) {
    g.beginPath(); g.moveTo(L, Math.round(Y(v)) + 0.5); g.lineTo(L + pw, Math.round(Y(v)) + 0.5); g.stroke();
    g.fillText(fmtBytes(v), L - 6, Y(v));
  }
  const ts = timeStep(t1 - t0);
  g.textAlign = 'center';
  g.textBaseline = 'top';
  for (let t = Math.ceil(t0 / ts) * ts; t <= t1; t += ts) {
    const x = Math.round(X(t)) + 0.5;
    g.beginPath(); g.moveTo(x, T); g.lineTo(x, T + ph + 4); g.stroke();
    g.fillText(fmtClock(t, ts < 60000), x, T + ph + 6);
  }
  g.save();
  g.beginPath(); g.rect(L, T, pw, ph); g.clip();
  // the stack: each figure on top of the ones below it, broken at gaps
  const base = d.t.map(() => 0);
  c.series = [];
  for (const f of STACK) {
    const top = d.t.map((_, i) => (d.v[f][i] == null ? null : base[i] + d.v[f][i]));
    g.fillStyle = FIG_COLOR[f];
    let i = 0;
    while (i < d.t.length) {
      while (i < d.t.length && top[i] == null) i++;
      let j = i;
      while (j < d.t.length && top[j] != null) j++;
      if (j > i) {
        g.beginPath();
        const step = (k) => (k + 1 < d.t.length ? d.t[k + 1] - d.t[k] : (S.daemon ? S.daemon.sample_ms : 1000));
        g.moveTo(X(d.t[i]), Y(base[i]));
        for (let k = i; k < j; k++) { g.lineTo(X(d.t[k]), Y(top[k])); if (k === j - 1) g.lineTo(X(d.t[k] + step(k) * 0.9), Y(top[k])); }
        g.lineTo(X(d.t[j - 1] + step(j - 1) * 0.9), Y(base[j - 1]));
        for (let k = j - 1; k >= i; k--) g.lineTo(X(d.t[k]), Y(base[k]));
        g.closePath();
        g.fill();
      }
      i = j;
    }
    for (let k = 0; k < d.t.length; k++) if (top[k] != null) base[k] = top[k];
    c.series.push(f);
  }
  // reclaimable: hatched over the bottom of the free resident band (free resident pages and
  // the metadata of empty heaps, just above it, are what release and trim give back)
  g.fillStyle = hatch(g);
  for (let i = 0; i < d.t.length;) {
    while (i < d.t.length && !d.v.reclaimable[i]) i++;
    let j = i;
    while (j < d.t.length && d.v.reclaimable[j]) j++;
    if (j > i) {
      const lo = (k) => (d.v.in_use[k] || 0) + (d.v.cached[k] || 0) + (d.v.fragmented[k] || 0);
      const step = (k) => (k + 1 < d.t.length ? d.t[k + 1] - d.t[k] : (S.daemon ? S.daemon.sample_ms : 1000));
      g.beginPath();
      g.moveTo(X(d.t[i]), Y(lo(i)));
      for (let k = i; k < j; k++) { g.lineTo(X(d.t[k]), Y(lo(k) + d.v.reclaimable[k])); if (k === j - 1) g.lineTo(X(d.t[k] + step(k) * 0.9), Y(lo(k) + d.v.reclaimable[k])); }
      g.lineTo(X(d.t[j - 1] + step(j - 1) * 0.9), Y(lo(j - 1)));
      for (let k = j - 1; k >= i; k--) g.lineTo(X(d.t[k]), Y(lo(k)));
      g.closePath();
      g.fill();
    }
    i = j;
  }
  // RSS over the stack
  g.strokeStyle = FIG_COLOR.rss;
  g.lineWidth = 1.6;
  g.beginPath();
  let pen = false, points = 0;
  for (let i = 0; i < d.t.length; i++) {
    const v = d.v.rss[i];
    if (v == null) { pen = false; continue; }
    if (d.t[i] >= t0) points++;
    if (pen) g.lineTo(X(d.t[i]), Y(v)); else g.moveTo(X(d.t[i]), Y(v));
    pen = true;
  }
  g.stroke();
  c.series.push('rss', 'reclaimable');
  c.points = points;
  c.first = d.t.length ? d.t[0] : null;
  // events: a line and a marker at the top
  c.markers = [];
  for (const e of S.events) {
    if (e.t < t0 || e.t > t1) continue;
    if (e.pid != null && e.pid !== q.pid) continue;
    if (e.pid == null && e.kind !== 'daemon') continue;
    if (e.kind === 'start' && e.t < q.started_ms - 1000) continue;
    const x = Math.round(X(e.t)) + 0.5;
    const policy = e.trigger && e.trigger !== 'operator' && e.ok !== false;
    const col = e.ok === false ? EVENT_COLOR.failed : policy ? EVENT_COLOR.policy : EVENT_COLOR[e.kind] || '#677085';
    g.strokeStyle = col;
    g.lineWidth = 1;
    g.setLineDash(e.kind === 'daemon' ? [4, 3] : [2, 2]);
    g.beginPath(); g.moveTo(x, T); g.lineTo(x, T + ph); g.stroke();
    g.setLineDash([]);
    g.fillStyle = col;
    g.beginPath(); g.moveTo(x - 5, T); g.lineTo(x + 5, T); g.lineTo(x, T + 8); g.closePath(); g.fill();
    c.markers.push({ x, e });
  }
  g.restore();
  g.strokeStyle = '#c5cad4';
  g.strokeRect(L + 0.5, T + 0.5, pw, ph);
  c.geom = { L, T, pw, ph, t0, t1, d };
  const l = latest(q) || {};
  c.card.querySelector('.sub').textContent = 'pid ' + q.pid + ' · uid ' + q.uid + (q.profile ? ' · profile ' + q.profile : '') + ' · ' + (q.live ? 'up ' + fmtAge(Date.now() - q.started_ms) : 'exited ' + fmtClock(q.exited_ms, true) + (q.exit_reason ? ' (' + q.exit_reason + ')' : '')) + ' · RSS ' + fmtBytes(l.rss) + ' · in use ' + fmtBytes(l.in_use) + (q.truncated ? ' · window cut by history_max_bytes' : '');
  c.canvas.setAttribute('aria-label', 'memory of ' + q.exe + ' pid ' + q.pid + ' over ' + fmtAge(S.range));
  c.canvas.dataset.series = c.series.join(',');
  c.canvas.dataset.points = String(points);
  c.canvas.dataset.markers = c.markers.map((m) => m.e.kind).join(',');
}

function hover(c, ev) {
  const tip = document.getElementById('tip');
  const r = c.canvas.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  // every marker under the pointer (a profile's sets land at the process's start)
  const under = c.markers.filter((m) => Math.abs(m.x - x) <= 5).slice(-6);
  let text = under.map(({ e }) => e.kind + (e.ok === false ? ' (not done)' : '') + ' at ' + fmtClock(e.t, true) + '\n' + (e.who ? 'by ' + e.who + (e.trigger && e.trigger !== 'operator' && !e.who.startsWith(e.trigger) ? ' (' + e.trigger + ')' : '') + '\n' : '') + e.what).join('\n\n') || null;
  if (!text && c.geom && x >= c.geom.L) {
    const { L, pw, t0, t1, d } = c.geom;
    const t = t0 + (x - L) / pw * (t1 - t0);
    let best = -1;
    for (let i = 0; i < d.t.length; i++) if (d.t[i] <= t) best = i;
    if (best >= 0) {
      text = fmtClock(d.t[best], true) + (d.v.rss[best] == null ? '\nno sample' : '');
      if (d.v.rss[best] != null)
        for (const f of FIG) text += '\n' + (S.labels[f] || f) + ': ' + fmtBytes(d.v[f][best]);
    }
  }
  if (!text) { tip.hidden = true; return; }
  tip.textContent = text;
  tip.hidden = false;
  tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 300) + 'px';
  tip.style.top = ev.clientY + 14 + 'px';
  void y;
}

function renderCharts() {
  const box = document.getElementById('charts');
  for (const [pid, c] of S.charts) if (!S.selected.has(pid) || !byPid(pid)) { c.card.remove(); S.charts.delete(pid); }
  const qs = [...S.selected].map(byPid).filter(Boolean).filter(visible);
  qs.sort((a, b) => (a.exe < b.exe ? -1 : a.exe > b.exe ? 1 : a.pid - b.pid));
  for (const q of qs) {
    const c = ensureCard(q);
    c.q = q;
    c.card.style.setProperty('--svc', serviceColor(q.exe));
    box.appendChild(c.card);
  }
  for (const [pid, c] of S.charts) if (!qs.includes(c.q)) c.card.remove();
  for (const q of qs) drawChart(S.charts.get(q.pid));
}

function renderHeader() {
  const d = S.daemon;
  if (!d) return;
  document.getElementById('host').textContent = d.host;
  document.getElementById('daemon').textContent = 'allocctld ' + d.version + ' · pid ' + d.pid + ' · up ' + fmtAge(Date.now() - d.started_ms) + ' · ' + d.processes + ' processes · history ' + fmtBytes(d.history_bytes) + ' of ' + fmtBytes(d.history_max_bytes) + (S.connected ? '' : ' · offline');
  document.getElementById('period').textContent = d.sample_ms >= 1000 ? d.sample_ms / 1000 + ' s' : d.sample_ms + ' ms';
  document.title = 'liballoc · ' + d.host;
  const span = d.coarse_ms * d.coarse_slots;
  for (const b of document.querySelectorAll('#range button')) {
    b.classList.toggle('on', Number(b.dataset.range) === S.range);
    b.disabled = Number(b.dataset.range) > span;
  }
}

function render() {
  renderHeader();
  renderTable();
  renderCharts();
}

// ---- state in the address (a reload keeps the view) --------------------------------------
function saveHash() {
  const p = new URLSearchParams();
  p.set('range', String(S.range / 60000) + 'm');
  if (S.selected.size) p.set('pid', [...S.selected].join(','));
  p.set('sort', (S.sort.dir > 0 ? '' : '-') + S.sort.key);
  if (S.filter) p.set('filter', S.filter);
  if (S.group !== 'exe') p.set('group', S.group);
  if (!S.showExited) p.set('exited', '0');
  history.replaceState(null, '', '#' + p.toString());
}
function loadHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  const r = parseInt(p.get('range') || '', 10);
  if (r > 0) S.range = r * 60000;
  for (const x of (p.get('pid') || '').split(',')) if (/^\d+$/.test(x)) S.selected.add(Number(x));
  const s = p.get('sort');
  if (s) S.sort = { key: s.replace(/^-/, ''), dir: s.startsWith('-') ? -1 : 1 };
  S.filter = p.get('filter') || '';
  S.group = ['profile', 'uid'].includes(p.get('group')) ? p.get('group') : 'exe';
  document.getElementById('groupby').value = S.group;
  S.showExited = p.get('exited') !== '0';
  document.getElementById('filter').value = S.filter;
  document.getElementById('exited').checked = S.showExited;
}

function init() {
  loadHash();
  for (const th of document.querySelectorAll('#procs th[data-sort]'))
    th.addEventListener('click', () => {
      const k = th.dataset.sort;
      S.sort = S.sort.key === k ? { key: k, dir: -S.sort.dir } : { key: k, dir: NAME_KEYS.includes(k) && k !== 'state' ? 1 : -1 };
      saveHash();
      render();
    });
  for (const b of document.querySelectorAll('#range button'))
    b.addEventListener('click', () => {
      S.range = Number(b.dataset.range);
      saveHash();
      loadCharted(true).then(render, () => render());
    });
  document.getElementById('filter').addEventListener('input', (e) => { S.filter = e.target.value.trim(); saveHash(); render(); });
  document.getElementById('groupby').addEventListener('change', (e) => { S.group = e.target.value; saveHash(); render(); });
  document.getElementById('exited').addEventListener('change', (e) => { S.showExited = e.target.checked; saveHash(); render(); });
  window.addEventListener('resize', () => renderCharts());
  tick();
}

document.addEventListener('DOMContentLoaded', init);
