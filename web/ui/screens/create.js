// A new cluster: pick a template and size, see the plan weftd would carry
// out (`cluster.plan`), then confirm.
import { html, useState, useEffect, useMemo } from '../lib/html.js';
import * as api from '../lib/api.js';
import { navigate } from '../lib/router.js';
import { useAsync, useAction, ErrorNote, Loading, Page, Card, Field } from '../lib/components.js';
import { listEntities, templateSizeRange } from '../lib/catalog.js';
import { PlanSummary, parseConfig } from '../lib/plan.js';
import { parseDuration, duration } from '../lib/format.js';

async function loadChoices() {
  const [templates, providers, hardware, images] = await Promise.all([
    listEntities('clustertemplate'),
    api.call('provider.list', {}),
    api.call('hardwaretype.list', {}),
    api.call('imagetype.list', {}),
  ]);
  const names = (r) => (r.entities || []).map((e) => e.name);
  return { templates, providers: names(providers), hardware: names(hardware), images: names(images) };
}

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function Select({ value, onChange, options, placeholder, testid }) {
  return html`<select value=${value} onChange=${(e) => onChange(e.target.value)} data-testid=${testid}>
    <option value="">${placeholder}</option>
    ${options.map((o) => html`<option value=${o}>${o}</option>`)}
  </select>`;
}

function CreateForm({ choices, initialTemplate }) {
  const [template, setTemplate] = useState(initialTemplate && choices.templates.some((t) => t.name === initialTemplate)
    ? initialTemplate : choices.templates[0]?.name || '');
  const entity = useMemo(() => choices.templates.find((t) => t.name === template)?.entity || {}, [template]);
  const range = templateSizeRange(entity);
  const defaults = entity.defaults || {};
  const [name, setName] = useState('');
  const [size, setSize] = useState(String(range.min));
  const [provider, setProvider] = useState('');
  const [hardwaretype, setHardwaretype] = useState('');
  const [imagetype, setImagetype] = useState('');
  const [services, setServices] = useState(defaults.services || []);
  const [config, setConfig] = useState('');
  const [lease, setLease] = useState('');
  const [keep, setKeep] = useState(false);
  const [plan, setPlan] = useState(null);
  const [planFor, setPlanFor] = useState(null);

  useEffect(() => {
    setSize(String(templateSizeRange(entity).min));
    setServices(entity.defaults?.services || []);
    setHardwaretype('');
    setImagetype('');
    setProvider('');
    setPlan(null);
  }, [template]);

  const compatServices = entity.compatibility?.services || [];
  const hardwareChoices = entity.compatibility?.hardwaretypes || choices.hardware;
  const imageChoices = entity.compatibility?.imagetypes || choices.images;
  const cfg = parseConfig(config);
  const leaseMs = lease.trim() ? parseDuration(lease) : undefined;
  const sizeNumber = Number(size);
  const errors = {
    name: name && !NAME_RE.test(name) ? 'Lower-case letters, digits and dashes; it becomes part of each node\'s hostname.' : null,
    size: !Number.isInteger(sizeNumber) || sizeNumber < 1 ? 'A whole number of nodes, 1 or more.'
      : range.max && sizeNumber > range.max ? `This template allows at most ${range.max} nodes.`
        : sizeNumber < range.min ? `This template needs at least ${range.min} nodes.` : null,
    config: cfg.error || null,
    lease: leaseMs === null ? 'A duration such as 12h, 1d or 7d.' : null,
  };
  const valid = name && template && !Object.values(errors).some(Boolean);

  const body = () => {
    const b = { name, template, size: sizeNumber };
    if (provider) b.provider = provider;
    if (hardwaretype) b.hardwaretype = hardwaretype;
    if (imagetype) b.imagetype = imagetype;
    const same = services.length === (defaults.services || []).length && services.every((s) => (defaults.services || []).includes(s));
    if (!same) b.services = services;
    if (cfg.value) b.config = cfg.value;
    return b;
  };
  const key = JSON.stringify([body(), leaseMs, keep]);
  const stale = plan && planFor !== key;

  const preview = useAction(async () => {
    const p = await api.call('cluster.plan', body());
    setPlan(p);
    setPlanFor(key);
  });
  const create = useAction(async () => {
    const b = body();
    if (leaseMs !== undefined) b.lease_ms = leaseMs;
    if (keep) b.keep_on_failure = true;
    const r = await api.call('cluster.create', b);
    navigate('/clusters/' + r.cluster.id);
  });

  const toggle = (s) => setServices(services.includes(s) ? services.filter((x) => x !== s) : [...services, s]);

  return html`<div class="stack">
    <${Card} title="What to make">
      <form class="form-grid" data-testid="create-form" onSubmit=${(e) => { e.preventDefault(); if (valid) preview.run(); }}>
        <${Field} label="Template">
          <select value=${template} onChange=${(e) => setTemplate(e.target.value)} name="template">
            ${choices.templates.map((t) => html`<option value=${t.name}>${t.name}</option>`)}
          </select>
        <//>
        <${Field} label="Name" error=${errors.name} hint="Unique among your live clusters">
          <input name="name" value=${name} placeholder="shop" onInput=${(e) => setName(e.target.value.trim())} />
        <//>
        <${Field} label="Size" error=${errors.size} hint=${range.max ? `${range.min} to ${range.max} nodes` : `at least ${range.min}`}>
          <input name="size" type="number" min=${range.min} max=${range.max || undefined} value=${size} onInput=${(e) => setSize(e.target.value)} />
        <//>
        <${Field} label="Provider" hint=${`default: ${defaults.provider || 'the template\'s'}`}>
          <${Select} value=${provider} onChange=${setProvider} options=${choices.providers} placeholder="template default" />
        <//>
        <${Field} label="Hardware type" hint=${`default: ${defaults.hardwaretype || '—'}`}>
          <${Select} value=${hardwaretype} onChange=${setHardwaretype} options=${hardwareChoices} placeholder="template default" />
        <//>
        <${Field} label="Image type" hint=${`default: ${defaults.imagetype || '—'}`}>
          <${Select} value=${imagetype} onChange=${setImagetype} options=${imageChoices} placeholder="template default" />
        <//>
        <div class="field span-all"><span class="field-label">Services</span>
          <div class="checks">${compatServices.map((s) => html`<label class="check">
            <input type="checkbox" checked=${services.includes(s)} onChange=${() => toggle(s)} />${s}</label>`)}</div>
        </div>
        <${Field} label="Lease" error=${errors.lease}
          hint=${entity.administration?.leaseduration ? `default ${entity.administration.leaseduration.initial}, at most ${entity.administration.leaseduration.max}` : 'no lease by default'}>
          <input name="lease" value=${lease} placeholder=${entity.administration?.leaseduration?.initial || 'none'} onInput=${(e) => setLease(e.target.value)} />
        <//>
        <div class="field"><span class="field-label">On failure</span>
          <label class="check"><input type="checkbox" checked=${keep} onChange=${() => setKeep(!keep)} />keep what was made (no undo)</label></div>
        <div></div>
        <${Field} label="Config (JSON, merged over the template's defaults)" error=${errors.config}>
          <textarea name="config" rows="4" placeholder=${JSON.stringify(defaults.config || {})} value=${config}
            onInput=${(e) => setConfig(e.target.value)}></textarea>
        <//>
        <div class="row span-all">
          <button class="button primary" type="submit" disabled=${!valid || preview.busy} data-testid="preview">
            ${preview.busy ? 'Planning…' : 'Preview plan'}</button>
          <span class="muted">Nothing is made until you confirm the plan.</span>
        </div>
        <div class="span-all"><${ErrorNote} error=${preview.error} title="The plan failed:" /></div>
      </form>
    <//>
    ${plan ? html`<${Card} title=${`Plan for ${name || 'the cluster'}`} actions=${stale ? html`<span class="badge tone-warn">out of date: preview again</span>` : null}>
      <div class="stack">
        <${PlanSummary} plan=${plan} />
        ${leaseMs ? html`<div class="muted">Lease: ${duration(leaseMs)}</div>` : null}
        <div class="row">
          <button class="button primary" disabled=${stale || create.busy} onClick=${() => create.run()} data-testid="create">
            ${create.busy ? 'Creating…' : `Create ${name}`}</button>
          <button class="button" onClick=${() => setPlan(null)}>Change</button>
        </div>
        <${ErrorNote} error=${create.error} title="Not created:" />
      </div>
    <//>` : null}
  </div>`;
}

export function CreateClusterScreen({ query }) {
  const { data, error, reload } = useAsync(loadChoices, []);
  return html`<${Page} title="New cluster" subtitle="Choose a template, look at the plan, then create">
    <${ErrorNote} error=${error} onRetry=${reload} />
    ${!data && !error ? html`<${Loading} />` : null}
    ${data && !data.templates.length ? html`<div class="notice">No cluster template yet: an administrator adds them.</div>` : null}
    ${data && data.templates.length ? html`<${CreateForm} choices=${data} initialTemplate=${query.template} />` : null}
  <//>`;
}
