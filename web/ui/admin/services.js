// Services: their dependencies (requires, uses, provides, conflicts) and, per
// action, the automator that carries it out with that automator's fields.
import { html, useState } from './deps.js';
import { Field, ListInput } from './kit.js';
import { CatalogScreen, NameFields } from './catalog_screen.js';
import { usePlugins, pluginTypes, PluginFields } from './plugin_fields.js';

const ACTIONS = ['install', 'configure', 'initialize', 'start', 'stop', 'remove'];

// Sets value[a][b]...=v on a copy, dropping objects and lists left empty.
function setPath(obj, path, v) {
  const [head, ...rest] = path;
  const next = { ...(obj || {}) };
  const child = rest.length ? setPath(next[head], rest, v) : v;
  const empty = child === undefined || (Array.isArray(child) && child.length === 0) ||
    (child && typeof child === 'object' && !Array.isArray(child) && Object.keys(child).length === 0);
  if (empty) delete next[head]; else next[head] = child;
  return next;
}

function DependencyFields({ value, onChange }) {
  const deps = value.dependencies || {};
  const row = (label, path, help) => {
    const id = `dep-${path.join('-')}`;
    const current = path.reduce((o, k) => (o ? o[k] : undefined), deps);
    return html`<${Field} label=${label} forId=${id} help=${help}>
      <${ListInput} id=${id} value=${current || []} onChange=${(list) => onChange({ ...value, dependencies: setPath(deps, path, list) || {} })} /></${Field}>`;
  };
  return html`<fieldset><legend>Dependencies</legend><div class="form-grid">
    ${row('Provides', ['provides'], 'names other services can require instead of this one\'s name')}
    ${row('Conflicts', ['conflicts'], 'services that may not be on the same cluster')}
    ${row('Install requires', ['install', 'requires'], 'must be on the cluster; installed first')}
    ${row('Install uses', ['install', 'uses'], 'installed first when present')}
    ${row('Runtime requires', ['runtime', 'requires'], 'must be on the cluster; started first')}
    ${row('Runtime uses', ['runtime', 'uses'], 'started first when present')}
  </div></fieldset>`;
}

// One action: on or off; when on, its automator and that automator's fields,
// folded to a one-line summary until opened (six actions of every field are
// too long to read at once).
function ActionFields({ name, action, stored, automators, plugins, onChange }) {
  const [open, setOpen] = useState(false);
  const enabled = !!action;
  const plugin = (plugins || []).find((p) => p.type === action?.type);
  const options = [...new Set([...automators, ...(action?.type ? [action.type] : [])])];
  const fieldCount = Object.keys(action?.fields || {}).length;
  return html`<fieldset class="service-action" data-action=${name}>
    <legend><label><input type="checkbox" checked=${enabled} name=${`action-${name}`}
      onChange=${(e) => { setOpen(e.target.checked); onChange(e.target.checked ? { type: automators[0] || '', fields: {} } : undefined); }} /> ${name}</label></legend>
    ${enabled ? html`<details open=${open} onToggle=${(e) => setOpen(e.currentTarget.open)}>
      <summary>${action.type || 'no automator'}, ${fieldCount} field${fieldCount === 1 ? '' : 's'} set</summary>
      <div class="stack">
      <${Field} label="Automator" forId=${`action-${name}-type`}>
        <select id=${`action-${name}-type`} value=${action.type || ''} onChange=${(e) => onChange({ ...action, type: e.target.value })}>
          <option value="">choose…</option>
          ${options.map((t) => html`<option value=${t}>${t}</option>`)}
        </select></${Field}>
      ${action.type ? html`<${PluginFields} plugin=${plugin} idPrefix=${`action-${name}`} values=${action.fields || {}}
        stored=${stored?.fields} onChange=${(fields) => onChange({ ...action, fields })} />` : null}
      </div></details>` : null}
  </fieldset>`;
}

function ServiceForm({ value, onChange, isNew, stored }) {
  const plugins = usePlugins();
  const automators = pluginTypes(plugins.data, 'automator');
  const actions = value.provisioner?.actions || {};
  const setAction = (name, action) => onChange({ ...value, provisioner: setPath(value.provisioner, ['actions', name], action) || {} });
  const extra = Object.keys(actions).filter((a) => !ACTIONS.includes(a));
  return html`<form class="entity-form" onSubmit=${(e) => e.preventDefault()}>
    <${NameFields} value=${value} onChange=${onChange} isNew=${isNew} Field=${Field} />
    <${DependencyFields} value=${value} onChange=${onChange} />
    <h3>Actions</h3>
    ${ACTIONS.map((name) => html`<${ActionFields} name=${name} action=${actions[name]} stored=${stored?.provisioner?.actions?.[name]}
      automators=${automators} plugins=${plugins.data} onChange=${(a) => setAction(name, a)} />`)}
    ${extra.length ? html`<p class="muted">Other actions (kept, never run): ${extra.join(', ')}</p>` : null}
  </form>`;
}

export default function ServicesScreen() {
  return html`<${CatalogScreen} kind="service" title="Services" Form=${ServiceForm}
    intro="What runs on the nodes: dependencies between services, and the automator and fields for each action."
    blank=${{ name: '', dependencies: {}, provisioner: { actions: {} } }} />`;
}
