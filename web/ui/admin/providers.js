// Providers: a provider plugin type and its fields, the inputs generated from
// the schema the plugin declares (plugin.list).
import { html } from './deps.js';
import { Field } from './kit.js';
import { CatalogScreen, NameFields } from './catalog_screen.js';
import { usePlugins, pluginTypes, PluginFields } from './plugin_fields.js';

function ProviderForm({ value, onChange, isNew, stored }) {
  const plugins = usePlugins();
  const types = pluginTypes(plugins.data, 'provider');
  const plugin = (plugins.data || []).find((p) => p.type === value.providertype);
  const options = [...new Set([...types, ...(value.providertype ? [value.providertype] : [])])];
  return html`<form class="entity-form" onSubmit=${(e) => e.preventDefault()}>
    <${NameFields} value=${value} onChange=${onChange} isNew=${isNew} Field=${Field} />
    <${Field} label="Provider type" forId="providertype" help="the provider plugin that makes the machines">
      <select id="providertype" value=${value.providertype || ''}
        onChange=${(e) => onChange({ ...value, providertype: e.target.value })}>
        <option value="">choose…</option>
        ${options.map((t) => html`<option value=${t}>${t}</option>`)}
      </select></${Field}>
    <fieldset><legend>Fields of ${value.providertype || 'the plugin'}</legend>
      ${value.providertype ? html`<${PluginFields} plugin=${plugin} idPrefix="provisioner"
        values=${value.provisioner || {}} stored=${stored?.provisioner}
        onChange=${(provisioner) => onChange({ ...value, provisioner })} />` : html`<p class="muted">Choose a provider type first.</p>`}
    </fieldset>
  </form>`;
}

export default function ProvidersScreen() {
  return html`<${CatalogScreen} kind="provider" title="Providers" Form=${ProviderForm}
    intro="Where machines come from: a provider plugin type and its settings. Secret fields are sealed when saved and never shown again."
    blank=${{ name: '', providertype: '', provisioner: {} }} />`;
}
