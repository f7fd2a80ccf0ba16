// The cluster templates of the tenant, each a way to start a new cluster.
import { html } from '../lib/html.js';
import { href } from '../lib/router.js';
import { useAsync, ErrorNote, Loading, Page, Card, KeyValues } from '../lib/components.js';
import { listEntities, templateSizeRange, leaseText } from '../lib/catalog.js';

function Chips({ items }) {
  if (!items || !items.length) return html`<span class="muted">—</span>`;
  return html`<span class="chips">${items.map((s) => html`<span class="chip">${s}</span>`)}</span>`;
}

function TemplateCard({ entry }) {
  const t = entry.entity || {};
  const size = templateSizeRange(t);
  const lease = t.administration?.leaseduration;
  return html`<${Card} className="template-card" title=${t.name || entry.name}
      actions=${html`<a class="button small primary" href=${href('/create?template=' + encodeURIComponent(entry.name))}
        data-testid=${'use-' + entry.name}>Create cluster</a>`}>
    <div class="muted">${t.description || 'No description.'}</div>
    <${KeyValues} items=${[
      ['size', size.max === size.min ? `${size.min} ${size.min === 1 ? 'node' : 'nodes'}` : size.max ? `${size.min} to ${size.max} nodes` : `${size.min} or more nodes`],
      ['services', html`<${Chips} items=${t.defaults?.services} />`],
      ['optional', html`<${Chips} items=${(t.compatibility?.services || []).filter((s) => !(t.defaults?.services || []).includes(s))} />`],
      ['hardware', html`<${Chips} items=${t.compatibility?.hardwaretypes} />`],
      ['images', html`<${Chips} items=${t.compatibility?.imagetypes} />`],
      ['provider', t.defaults?.provider || '—'],
      lease ? ['lease', leaseText(lease)] : null,
      ['version', entry.version],
    ]} />
  <//>`;
}

export function TemplatesScreen() {
  const { data, error, reload } = useAsync(() => listEntities('clustertemplate'), []);
  return html`<${Page} title="Templates" subtitle="What a cluster can be made of in this tenant">
    <${ErrorNote} error=${error} onRetry=${reload} />
    ${!data && !error ? html`<${Loading} />` : null}
    ${data && !data.length ? html`<div class="notice">No cluster template yet: an administrator adds them.</div>` : null}
    ${data && data.length ? html`<div class="template-grid">${data.map((e) => html`<${TemplateCard} key=${e.name} entry=${e} />`)}</div>` : null}
  <//>`;
}
