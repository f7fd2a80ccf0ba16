// The pieces every screen is built from: data loading, error notes, tables,
// badges, the progress bar and the confirmation dialog.
import { html, useState, useEffect, useCallback, useRef } from './html.js';
import { percent } from './format.js';

// Whether a failure may pass by itself: weftd or the gateway could not be
// reached, or asked to wait (UNAVAILABLE, 502, 503, 504, no answer at all).
export function retryable(error) {
  return !!error && (error.code === 'UNAVAILABLE' || [0, 502, 503, 504].includes(error.status));
}

const RETRY_FIRST_MS = 2000;
const RETRY_MAX_MS = 30000;

// Loads data with fn() whenever deps change; reload() loads again in place
// (keeping the old data on screen meanwhile, so live screens do not flicker).
// A load that failed because weftd could not be reached is tried again by
// itself, waiting longer each time, until it succeeds.
export function useAsync(fn, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const generation = useRef(0);
  const retry = useRef({ timer: null, delay: RETRY_FIRST_MS, run: null });
  const run = useCallback(() => {
    const mine = ++generation.current;
    clearTimeout(retry.current.timer);
    retry.current.timer = null;
    setState((s) => ({ ...s, loading: true }));
    return Promise.resolve()
      .then(fn)
      .then(
        (data) => {
          if (mine !== generation.current) return;
          retry.current.delay = RETRY_FIRST_MS;
          setState({ data, error: null, loading: false });
        },
        (error) => {
          if (mine !== generation.current) return;
          if (retryable(error)) {
            const r = retry.current;
            r.timer = setTimeout(() => r.run && r.run(), r.delay);
            r.delay = Math.min(r.delay * 2, RETRY_MAX_MS);
          }
          setState((s) => ({ data: s.data, error, loading: false }));
        },
      );
  }, deps);
  retry.current.run = run;
  useEffect(() => { run(); }, [run]);
  useEffect(() => () => { clearTimeout(retry.current.timer); retry.current.run = null; }, []);
  return { ...state, reload: run };
}

// Runs an action (a button's op) and keeps its error beside the button.
export function useAction(fn) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (...args) => {
    setBusy(true);
    setError(null);
    try {
      return await fn(...args);
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, setError };
}

// weftd's sentences are the CLI's: some name ops and commands (`job.get`,
// `weft job watch 13`). Where weftd's details say what happened, the UI says
// it in its own words, and weftd's sentence follows on a line of its own.
export function uiWording(error) {
  const d = (error && error.details) || {};
  if (error && error.code === 'CONFLICT' && d.job != null) {
    const job = String(d.job);
    return html`${'This cluster is busy: '}<a href=${'#/jobs/' + encodeURIComponent(job)}>job #${job}</a>${
      `${d.operation ? ` (${d.operation})` : ''} is running. Wait until it ends, or abort it on its page; then try again.`}`;
  }
  const plain = error && typeof error.message === 'string' ? withoutCliHints(error.message) : null;
  return plain && plain !== error.message ? plain : null;
}

// A sentence without the hints in parentheses that name CLI commands or
// protocol ops ("wait for it (job.get, `weft job watch 13`)" reads "wait for it").
export function withoutCliHints(message) {
  return message.replace(/\s*\((?=[^()]*(?:`weft |\bweft [a-z]+ [a-z]|\b(?:job|cluster|task|host|session)\.[a-z_]+\b))[^()]*\)/g, '');
}

// With onRetry (a load's reload), a Retry button; a load that failed because
// weftd could not be reached also says that it is tried again by itself.
export function ErrorNote({ error, title, onRetry }) {
  if (!error) return null;
  const code = error.code && error.code !== 'ERROR' ? error.code : null;
  const words = uiWording(error);
  if (words) {
    return html`<div class="error-note" role="alert">
      ${title ? html`<strong>${title}</strong> ` : null}
      <span class="error-message">${words}</span>
      <div class="error-detail" data-testid="error-detail">${code ? `${code}: ` : ''}${error.message}</div>
    </div>`;
  }
  return html`<div class="error-note" role="alert">
    ${title ? html`<strong>${title}</strong> ` : null}
    ${code ? html`<span class="error-code">${code}</span> ` : null}
    <span class="error-message">${error.message || String(error)}</span>
    ${onRetry ? html`<div class="error-retry">
      ${retryable(error) ? html`<span data-testid="retrying">Trying again by itself…</span> ` : null}
      <button class="button small" data-testid="retry-load" onClick=${() => onRetry()}>Retry now</button>
    </div>` : null}
  </div>`;
}

export function Loading({ what = 'Loading' }) {
  return html`<div class="loading"><span class="spinner" aria-hidden="true"></span>${what}…</div>`;
}

const STATUS_TONE = {
  active: 'good', running: 'good', succeeded: 'good', live: 'good',
  pending: 'busy', leased: 'busy', queued: 'wait', waiting: 'wait', retrying: 'wait',
  failing: 'bad', failed: 'bad', inconsistent: 'bad', incomplete: 'warn', aborted: 'warn',
  stopped: 'muted', terminated: 'muted', cancelled: 'muted', silent: 'bad', unknown: 'muted',
  installed: 'wait', configured: 'wait', initialized: 'wait', 'delete failed': 'bad',
};

export function StatusBadge({ status }) {
  const s = status || 'unknown';
  return html`<span class="badge tone-${STATUS_TONE[s] || 'muted'}" data-status=${s}>${s}</span>`;
}

// done/total as a bar; failed tasks show as a red share after the green one.
export function ProgressBar({ done = 0, failed = 0, total = 0, label, status }) {
  const p = percent(done, total);
  const f = total ? Math.min(100 - p, Math.round((100 * failed) / total)) : 0;
  const state = status === 'failed' || status === 'failing' ? 'bad' : p === 100 ? 'done' : 'busy';
  return html`<div class="progress" data-state=${state}>
    <div class="progress-track" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${p}>
      <div class="progress-done" style=${`width:${p}%`}></div>
      <div class="progress-failed" style=${`width:${f}%`}></div>
    </div>
    <div class="progress-label"><span class="progress-percent">${p}%</span> ${label || `${done}/${total} tasks`}</div>
  </div>`;
}

// columns: [{key, title, render?(row), className?}]; rows keyed by rowKey(row).
export function Table({ columns, rows, rowKey = (r) => r.id, empty = 'Nothing here yet.', onRow, testid }) {
  if (!rows || rows.length === 0) return html`<div class="empty">${empty}</div>`;
  return html`<div class="table-wrap"><table class="table" data-testid=${testid}>
    <thead><tr>${columns.map((c) => html`<th class=${c.className || ''}>${c.title}</th>`)}</tr></thead>
    <tbody>${rows.map((r) => html`<tr key=${rowKey(r)} class=${onRow ? 'clickable' : ''}
        onClick=${onRow ? (e) => { if (!e.target.closest('a,button,input,select')) onRow(r); } : undefined}>
      ${columns.map((c) => html`<td class=${c.className || ''}>${c.render ? c.render(r) : r[c.key]}</td>`)}
    </tr>`)}</tbody>
  </table></div>`;
}

export function Page({ title, subtitle, actions, children }) {
  return html`<section class="page">
    <header class="page-head">
      <div><h1>${title}</h1>${subtitle ? html`<div class="subtitle">${subtitle}</div>` : null}</div>
      ${actions ? html`<div class="page-actions">${actions}</div>` : null}
    </header>
    ${children}
  </section>`;
}

export function Card({ title, actions, children, className = '' }) {
  return html`<section class=${'card ' + className}>
    ${title || actions ? html`<header class="card-head"><h2>${title}</h2>${actions ? html`<div class="card-actions">${actions}</div>` : null}</header>` : null}
    <div class="card-body">${children}</div>
  </section>`;
}

export function Modal({ title, onClose, children, footer }) {
  useEffect(() => {
    const key = (e) => { if (e.key === 'Escape') onClose(); };
    window.addEventListener('keydown', key);
    return () => window.removeEventListener('keydown', key);
  }, [onClose]);
  return html`<div class="modal-backdrop" onClick=${(e) => { if (e.target === e.currentTarget) onClose(); }}>
    <div class="modal" role="dialog" aria-modal="true" aria-label=${title}>
      <header class="modal-head"><h2>${title}</h2>
        <button class="icon-button" aria-label="Close" onClick=${onClose}>×</button></header>
      <div class="modal-body">${children}</div>
      ${footer ? html`<footer class="modal-foot">${footer}</footer>` : null}
    </div>
  </div>`;
}

// Asks before something that cannot be undone. With `typeToConfirm`, the
// button stays disabled until that word is typed.
export function ConfirmDialog({ title, message, confirmLabel = 'Confirm', danger = false, typeToConfirm, onConfirm, onClose }) {
  const [typed, setTyped] = useState('');
  const action = useAction(async () => { await onConfirm(); onClose(); });
  const ready = !typeToConfirm || typed === typeToConfirm;
  return html`<${Modal} title=${title} onClose=${onClose} footer=${html`
      <button class="button" onClick=${onClose}>Cancel</button>
      <button class=${'button ' + (danger ? 'danger' : 'primary')} disabled=${!ready || action.busy}
        data-testid="confirm" onClick=${() => action.run()}>${action.busy ? 'Working…' : confirmLabel}</button>`}>
    <p>${message}</p>
    ${typeToConfirm ? html`<label class="field"><span>Type <code>${typeToConfirm}</code> to confirm</span>
      <input autofocus value=${typed} onInput=${(e) => setTyped(e.target.value)} data-testid="confirm-input" /></label>` : null}
    <${ErrorNote} error=${action.error} />
  <//>`;
}

export function Field({ label, hint, error, children }) {
  return html`<label class=${'field' + (error ? ' has-error' : '')}>
    <span class="field-label">${label}</span>
    ${children}
    ${hint && !error ? html`<span class="field-hint">${hint}</span>` : null}
    ${error ? html`<span class="field-error" role="alert">${error}</span>` : null}
  </label>`;
}

export function KeyValues({ items }) {
  return html`<dl class="kv">${items.filter(Boolean).map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

export function Stat({ label, value, hint, href, testid }) {
  const body = html`<div class="stat-value" data-testid=${testid}>${value ?? '—'}</div><div class="stat-label">${label}</div>
    ${hint ? html`<div class="stat-hint">${hint}</div>` : null}`;
  return href ? html`<a class="stat" href=${href}>${body}</a>` : html`<div class="stat">${body}</div>`;
}

// Returns a function that calls fn at most once per `ms`, trailing: a burst of
// events during a job becomes one reload, and the last event is never lost.
export function useThrottle(fn, ms = 400) {
  const state = useRef({ timer: null, last: 0, fn });
  state.current.fn = fn;
  useEffect(() => () => clearTimeout(state.current.timer), []);
  return useCallback(() => {
    const s = state.current;
    if (s.timer) return;
    const wait = Math.max(0, s.last + ms - Date.now());
    s.timer = setTimeout(() => { s.timer = null; s.last = Date.now(); s.fn(); }, wait);
  }, [ms]);
}
