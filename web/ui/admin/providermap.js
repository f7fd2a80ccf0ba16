// The providermap of a hardware or image type: one row per provider with the
// keys that provider needs (flavor; image and sshuser). Other keys of an entry
// are kept as they are.
import { html } from './deps.js';
import { call } from './client.js';
import { useLoad } from './kit.js';

export function useProviderNames() {
  return useLoad(() => call('provider.list', {}).then((r) => r.entities.map((e) => e.name)), []);
}

export function ProviderMap({ value, onChange, keys }) {
  const providers = useProviderNames();
  const map = value || {};
  const names = [...new Set([...Object.keys(map), ...(providers.data || [])])].sort();
  const setEntry = (provider, key, text) => {
    const entry = { ...(map[provider] || {}) };
    if (text === '') delete entry[key]; else entry[key] = text;
    const next = { ...map };
    if (Object.keys(entry).length === 0) delete next[provider]; else next[provider] = entry;
    onChange(next);
  };
  return html`<div class="table-wrap"><table class="table providermap">
    <thead><tr><th>Provider</th>${keys.map((k) => html`<th>${k}</th>`)}</tr></thead>
    <tbody>${names.length === 0 ? html`<tr><td colspan=${keys.length + 1} class="muted">Add a provider first.</td></tr>` : null}
      ${names.map((p) => html`<tr data-provider=${p}><td>${p}${map[p] ? '' : html` <small class="muted">(not mapped)</small>`}</td>
        ${keys.map((k) => html`<td><input type="text" aria-label=${`${k} for ${p}`} name=${`${p}.${k}`} value=${map[p]?.[k] ?? ''}
          onInput=${(e) => setEntry(p, k, e.target.value)} /></td>`)}</tr>`)}
    </tbody></table></div>`;
}
