// Image types: the image and SSH user each provider uses for it.
import { html } from './deps.js';
import { Field } from './kit.js';
import { CatalogScreen, NameFields } from './catalog_screen.js';
import { ProviderMap } from './providermap.js';

function ImageTypeForm({ value, onChange, isNew }) {
  return html`<form class="entity-form" onSubmit=${(e) => e.preventDefault()}>
    <${NameFields} value=${value} onChange=${onChange} isNew=${isNew} Field=${Field} />
    <fieldset><legend>Image per provider</legend>
      <${ProviderMap} keys=${['image', 'sshuser']} value=${value.providermap} onChange=${(providermap) => onChange({ ...value, providermap })} />
    </fieldset>
  </form>`;
}

export default function ImageTypesScreen() {
  return html`<${CatalogScreen} kind="imagetype" title="Image types" Form=${ImageTypeForm}
    intro="Operating system images, mapped to each provider's image and SSH user." blank=${{ name: '', providermap: {} }} />`;
}
