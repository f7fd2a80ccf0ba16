// Hardware types: the flavor each provider uses for it.
import { html } from './deps.js';
import { Field } from './kit.js';
import { CatalogScreen, NameFields } from './catalog_screen.js';
import { ProviderMap } from './providermap.js';

function HardwareTypeForm({ value, onChange, isNew }) {
  return html`<form class="entity-form" onSubmit=${(e) => e.preventDefault()}>
    <${NameFields} value=${value} onChange=${onChange} isNew=${isNew} Field=${Field} />
    <fieldset><legend>Flavor per provider</legend>
      <p class="muted">A provider without a flavor cannot make this hardware type.</p>
      <${ProviderMap} keys=${['flavor']} value=${value.providermap} onChange=${(providermap) => onChange({ ...value, providermap })} />
    </fieldset>
  </form>`;
}

export default function HardwareTypesScreen() {
  return html`<${CatalogScreen} kind="hardwaretype" title="Hardware types" Form=${HardwareTypeForm}
    intro="Machine sizes, mapped to each provider's flavor." blank=${{ name: '', providermap: {} }} />`;
}
