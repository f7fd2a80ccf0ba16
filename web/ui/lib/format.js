// Numbers and times as the CLI prints them: durations read `22ms`, `5.2s`,
// `5m 12s`, `3d 4h`.

export function duration(ms) {
  if (ms == null || !isFinite(ms)) return '—';
  ms = Math.max(0, Math.round(ms));
  if (ms < 1000) return `${ms}ms`;
  if (ms < 10000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export function ago(ms, now = Date.now()) {
  if (!ms) return '—';
  const d = now - ms;
  if (d < 0) return 'in ' + duration(-d);
  if (d < 5000) return 'just now';
  return duration(d) + ' ago';
}

export function until(ms, now = Date.now()) {
  if (!ms) return 'never';
  const d = ms - now;
  return d <= 0 ? 'expired' : 'in ' + duration(d);
}

export function dateTime(ms) {
  if (!ms) return '—';
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// '7d', '12h', '30m', '45s', '1d 12h' -> milliseconds; null when it does not read.
export function parseDuration(text) {
  const t = String(text || '').trim();
  if (!t) return null;
  const units = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000, w: 604800000 };
  let total = 0;
  let rest = t;
  const re = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*/;
  while (rest.length) {
    const m = re.exec(rest);
    if (!m) return null;
    total += parseFloat(m[1]) * units[m[2]];
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

export function plural(n, one, many = one + 's') { return `${n} ${n === 1 ? one : many}`; }

// A cluster's nodes for its header: those it has (a delete's size is 0 from
// its start, while the nodes are still there), and while a job runs that
// changes them, the size it gets: "3 nodes (0 once job #5 is done)".
export function nodesText(nodes, size, runningJob) {
  const more = runningJob != null && size != null && size !== nodes ? ` (${size} once job #${runningJob} is done)` : '';
  return plural(nodes, 'node') + more;
}

export function percent(done, total) {
  if (!total) return 0;
  return Math.min(100, Math.round((100 * done) / total));
}
