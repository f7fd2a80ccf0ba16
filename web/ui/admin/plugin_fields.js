// Inputs generated from a plugin's declared fields (plugin.list): one per
// field, typed as the plugin says. Sensitive fields are write-only: the form
// never shows what is stored, only whether something is, and leaving the input
// empty keeps the stored (sealed) value, which weftd accepts back unchanged.
import { html } from './deps.js';
import { call } from './client.js';
import { useLoad, Field, JsonInput } from './kit.js';

export function usePlugins() {
  return useLoad(() => call('plugin.list', {}).then((r) => r.plugins || []), []);
}

export function pluginTypes(plugins, kind) {
  return (plugins || []).filter((p) => !kind || p.kind === kind).map((p) => p.type);
}

function isSealed(v) { return typeof v === 'string' && v.startsWith('enc:'); }

// values: the entity's fields object; stored: the same object as last saved.
export function PluginFields({ plugin, values, stored, onChange, idPrefix }) {
  if (!plugin) return html`<p class="muted">No live host has registered this plugin type, so its fields are not known; edit them in the JSON view.</p>`;
  const fields = plugin.fields || [];
  const declared = new Set(fields.map((f) => f.name));
  const others = Object.keys(values || {}).filter((k) => !declared.has(k));
  const set = (name, v) => {
    const next = { ...(values || {}) };
    if (v === undefined) delete next[name]; else next[name] = v;
    onChange(next);
  };
  return html`<div class="plugin-fields" data-plugin=${plugin.type}>
    ${fields.length === 0 ? html`<p class="muted">Plugin '${plugin.type}' declares no fields.</p>` : null}
    ${fields.map((f) => {
      const id = `${idPrefix || 'field'}-${f.name}`;
      const help = [f.description, hasDefault(f) ? `default ${JSON.stringify(f.default)}` : ''].filter(Boolean).join(' — ');
      const label = html`${f.label || f.name}${f.required ? html` <span class="required" title="required">*</span>` : null}`;
      return html`<${Field} label=${label} forId=${id} help=${help}>
        ${f.sensitive
          ? html`<${SecretInput} id=${id} field=${f} value=${values?.[f.name]} storedValue=${stored?.[f.name]} onChange=${(v) => set(f.name, v)} />`
          : html`<${PlainInput} id=${id} field=${f} value=${values?.[f.name]} onChange=${(v) => set(f.name, v)} />`}
      </${Field}>`;
    })}
    ${others.length ? html`<p class="muted">Fields the plugin does not declare (kept, edit them in the JSON view): ${others.join(', ')}</p>` : null}
  </div>`;
}

// A default worth showing: an empty string is no default to a reader.
function hasDefault(field) { return field.default !== undefined && field.default !== null && field.default !== ''; }

function PlainInput({ id, field, value, onChange }) {
  const placeholder = !hasDefault(field) ? '' : typeof field.default === 'string' ? field.default : JSON.stringify(field.default);
  switch (field.type) {
    case 'boolean':
      return html`<input id=${id} type="checkbox" checked=${value ?? field.default ?? false}
        onChange=${(e) => onChange(e.target.checked)} />`;
    case 'integer':
    case 'number':
      return html`<input id=${id} type="number" step=${field.type === 'integer' ? 1 : 'any'} value=${value ?? ''} placeholder=${placeholder}
        onInput=${(e) => onChange(e.target.value === '' ? undefined : Number(e.target.value))} />`;
    case 'json':
      return html`<${JsonInput} id=${id} rows=${4} value=${value ?? {}} onChange=${(v) => onChange(v)} />`;
    default:
      return html`<input id=${id} type="text" value=${value ?? ''} placeholder=${placeholder}
        onInput=${(e) => onChange(e.target.value === '' ? undefined : e.target.value)} />`;
  }
}

function SecretInput({ id, field, value, storedValue, onChange }) {
  const hasStored = storedValue !== undefined && storedValue !== null;
  const typed = isSealed(value) || value === undefined ? '' : (typeof value === 'string' ? value : JSON.stringify(value));
  const status = isSealed(value) ? 'set (sealed); type to replace it'
    : value === undefined ? (hasStored ? 'will be removed' : 'not set')
      : 'a new value will be sealed when saved';
  return html`<span class="secret-input">
    <input id=${id} type="password" autocomplete="new-password" value=${typed} placeholder=${isSealed(value) ? '••••••••' : ''}
      onInput=${(e) => {
        const text = e.target.value;
        if (text === '') return onChange(hasStored ? storedValue : undefined);
        if (field.type === 'string') return onChange(text);
        try { onChange(JSON.parse(text)); } catch { onChange(text); }
      }} />
    <small class="secret-status">${status}</small>
    ${value !== undefined ? html`<button type="button" class="button small" onClick=${() => onChange(undefined)}>Remove</button>` : null}
  </span>`;
}
