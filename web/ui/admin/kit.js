// Small pieces the admin screens share on top of the shell's components:
// loading an op's reply, a JSON view, a button that asks before deleting,
// list and JSON inputs.
import {
  html, useState, useEffect, ErrorNote, Loading as ShellLoading, ConfirmDialog, dateTime, useAsync,
} from './deps.js';

// Runs load() now and again on reload(); keeps the old data on screen while
// it reloads, and drops it when a load fails. A load that failed because weftd
// could not be reached is tried again by itself, waiting longer each time (the
// shell's useAsync).
export function useLoad(load, deps = []) {
  const state = useAsync(load, deps);
  return state.error ? { ...state, data: null } : state;
}

// Wraps an action: busy while it runs, its error kept to show beside its button.
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

export function ErrorText({ error }) { return html`<${ErrorNote} error=${error} />`; }

// What a loading state shows: the error, a spinner the first time, else nothing.
export function Loading({ state }) {
  if (state.error) return html`<${ErrorNote} error=${state.error} onRetry=${state.reload} />`;
  if (state.loading && !state.data) return html`<${ShellLoading} />`;
  return null;
}

export function JsonView({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}

// A delete (or revoke) that asks in a dialog before it acts.
export function ConfirmButton({ label, title, message, confirmLabel, onConfirm, disabled, small = true }) {
  const [asking, setAsking] = useState(false);
  return html`<button type="button" class=${`button danger${small ? ' small' : ''}`} disabled=${disabled} onClick=${() => setAsking(true)}>${label}</button>
    ${asking ? html`<${ConfirmDialog} title=${title || label} message=${message || 'This cannot be undone.'} danger=${true}
      confirmLabel=${confirmLabel || label} onConfirm=${onConfirm} onClose=${() => setAsking(false)} />` : null}`;
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
    if (next.has(option)) next.delete(option); else next.add(option);
    onChange(all.filter((o) => next.has(o)));
  };
  return html`<span class="checks">${all.map((option) => html`
    <label class="check"><input type="checkbox" name=${name} value=${option} checked=${chosen.has(option)}
      onChange=${() => toggle(option)} /> ${option}</label>`)}</span>`;
}

// A JSON value edited as text; onChange gets the parsed value once it parses.
export function JsonInput({ value, onChange, rows, id }) {
  const [text, setText] = useState(JSON.stringify(value ?? {}, null, 2));
  const [error, setError] = useState(null);
  return html`<div class="json-input stack">
    <textarea id=${id} rows=${rows || 6} spellcheck="false" value=${text} onInput=${(e) => {
      setText(e.target.value);
      try {
        const parsed = e.target.value.trim() === '' ? {} : JSON.parse(e.target.value);
        setError(null);
        onChange(parsed);
      } catch (err) {
        setError({ message: `This is not valid JSON yet (${err.message}); the last valid text is kept.` });
      }
    }}></textarea>
    <${ErrorNote} error=${error} />
  </div>`;
}

// A labelled input; unlike the shell's Field it is not a <label> around its
// input, so it can hold a group of checkboxes.
export function Field({ label, help, children, forId }) {
  return html`<div class="field">
    ${forId ? html`<label class="field-label" for=${forId}>${label}</label>` : html`<span class="field-label">${label}</span>`}
    ${children}
    ${help ? html`<span class="field-hint">${help}</span>` : null}
  </div>`;
}

export const formatTime = (ms) => dateTime(ms);

export function formatBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
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
