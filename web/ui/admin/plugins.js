// Plugin types the hosts registered, with the fields each declares (what the
// provider and service forms are generated from).
import { html } from './deps.js';
import { Loading } from './kit.js';
import { usePlugins } from './plugin_fields.js';

function FieldTable({ fields }) {
  if (!fields || fields.length === 0) return html`<p class="muted">No fields.</p>`;
  return html`<div class="table-wrap"><table class="table fields">
    <thead><tr><th>Field</th><th>Label</th><th>Type</th><th>Required</th><th>Sensitive</th><th>Default</th><th>Description</th></tr></thead>
    <tbody>${fields.map((f) => html`<tr data-field=${f.name}>
      <td><code>${f.name}</code></td><td>${f.label || ''}</td><td>${f.type}</td><td>${f.required ? 'yes' : ''}</td>
      <td>${f.sensitive ? 'yes (sealed)' : ''}</td><td>${f.default === undefined ? '' : html`<code>${JSON.stringify(f.default)}</code>`}</td>
      <td>${f.description || ''}</td></tr>`)}</tbody></table></div>`;
}

export default function PluginsScreen() {
  const plugins = usePlugins();
  return html`<section class="page admin-plugins">
    <h1>Plugin types</h1>
    <${Loading} state=${plugins} />
    ${plugins.data ? (plugins.data.length === 0 ? html`<p class="muted">No host has registered a plugin.</p>` : plugins.data.map((p) => html`
      <div class="card card-body stack plugin" data-plugin=${p.type}>
        <h2>${p.type} <small class="muted">${p.kind || ''} ${p.version ? `version ${p.version}` : ''}</small></h2>
        ${p.description ? html`<p>${p.description}</p>` : null}
        <p class="muted">Actions: ${(p.actions || []).join(', ') || '—'}. Hosts: ${(p.hosts || []).join(', ') || '—'} (live: ${(p.live_hosts || []).join(', ') || 'none'}).
          ${(p.resource_types || []).length ? ` Resource types: ${p.resource_types.join(', ')}.` : ''}</p>
        <${FieldTable} fields=${p.fields} />
      </div>`)) : null}
  </section>`;
}
