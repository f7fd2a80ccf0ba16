// Small pieces every admin screen uses: loading an op's reply, showing an
// error beside what caused it, a JSON view, a two-step delete, list inputs.
import { html, useState, useEffect, useCallback } from './deps.js';
import { onActingTenant } from './client.js';

// Runs load() now, again on reload() and whenever a superadmin switches tenant.
export function useLoad(load, deps = []) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const run = useCallback(() => {
    setState((s) => ({ ...s, loading: true }));
    return load().then(
      (data) => setState({ data, error: null, loading: false }),
      (error) => setState({ data: null, error, loading: false }));
  }, deps);
  useEffect(() => { run(); return onActingTenant(() => run()); }, [run]);
  return { ...state, reload: run };
}

// Wraps an action: busy while it runs, its error kept to show next to its button.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (action) => {
    setBusy(true);
    setError(null);
    try {
      return await action();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, run };
}

export function ErrorText({ error }) {
  if (!error) return null;
  const message = error.message || String(error);
  return html`<p class="error" role="alert" data-code=${error.code || ''}>${message}</p>`;
}

export function Loading({ state }) {
  if (state.error) return html`<${ErrorText} error=${state.error} />`;
  if (state.loading && !state.data) return html`<p class="muted">Loading…</p>`;
  return null;
}

export function JsonView({ value }) {
  return html`<pre class="json-view">${JSON.stringify(value, null, 2)}</pre>`;
}

// A delete (or revoke) that asks once more before it acts.
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled }) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return html`<button type="button" class="danger" disabled=${disabled} onClick=${() => setAsking(true)}>${label}</button>`;
  }
  return html`<span class="confirm">
    <button type="button" class="danger" onClick=${() => { setAsking(false); onConfirm(); }}>${confirmLabel || `Yes, ${label.toLowerCase()}`}</button>
    <button type="button" onClick=${() => setAsking(false)}>Cancel</button>
  </span>`;
}

// A list of names typed as "a, b, c".
export function ListInput({ value, onChange, placeholder, id }) {
  const [text, setText] = useState((value || []).join(', '));
  useEffect(() => {
    if (splitList(text).join(',') !== (value || []).join(',')) setText((value || []).join(', '));
  }, [value]);
  return html`<input id=${id} type="text" value=${text} placeholder=${placeholder || 'name, name, …'}
    onInput=${(e) => { setText(e.target.value); onChange(splitList(e.target.value)); }} />`;
}

export function splitList(text) {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

// Checkboxes over a known set of names; names in value but not in options stay
// listed, so nothing the entity holds is dropped silently.
export function CheckList({ options, value, onChange, name }) {
  const chosen = new Set(value || []);
  const all = [...new Set([...(options || []), ...(value || [])])];
  if (all.length === 0) return html`<span class="muted">none in the catalog</span>`;
  const toggle = (option) => {
    const next = new Set(chosen);
    next.has(option) ? next.delete(option) : next.add(option);
    onChange(all.filter((o) => next.has(o)));
  };
  return html`<span class="checklist">${all.map((option) => html`
    <label class="check"><input type="checkbox" name=${name} value=${option} checked=${chosen.has(option)}
      onChange=${() => toggle(option)} /> ${option}</label>`)}</span>`;
}

// A JSON object edited as text; onChange gets the parsed value or an error.
export function JsonInput({ value, onChange, rows, id }) {
  const [text, setText] = useState(JSON.stringify(value ?? {}, null, 2));
  const [error, setError] = useState(null);
  return html`<div class="json-input">
    <textarea id=${id} rows=${rows || 6} spellcheck="false" value=${text} onInput=${(e) => {
      setText(e.target.value);
      try {
        const parsed = e.target.value.trim() === '' ? {} : JSON.parse(e.target.value);
        setError(null);
        onChange(parsed);
      } catch (err) {
        setError({ message: `not valid JSON: ${err.message}` });
      }
    }}></textarea>
    <${ErrorText} error=${error} />
  </div>`;
}

export function Field({ label, help, children, forId }) {
  return html`<div class="field">
    <label for=${forId}>${label}</label>
    <div class="field-input">${children}${help ? html`<small class="help">${help}</small>` : null}</div>
  </div>`;
}

export function formatTime(ms) {
  if (!ms) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function formatBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

// Returns a copy of obj without the keys whose value is empty (so a form
// leaves out what the user did not fill in, as the catalog files do).
export function pruneEmpty(obj) {
  const out = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value === undefined || value === null || value === '') continue;
    if (Array.isArray(value) && value.length === 0) continue;
    if (typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) continue;
    out[key] = value;
  }
  return out;
}

// Saves a value as a file the browser downloads.
export function downloadJson(filename, value) {
  const blob = new Blob([JSON.stringify(value, null, 2) + '\n'], { type: 'application/json' });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
