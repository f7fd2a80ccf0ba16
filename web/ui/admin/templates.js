// Cluster templates: what a cluster may hold (compatibility), what it gets
// unless the user says otherwise (defaults), the rules its layout obeys
// (size, mustcoexist and cantcoexist groups, per-service quantities and
// hardware/image restrictions) and its lease.
import { html } from './deps.js';
import { call } from './client.js';
import { useLoad, Field, CheckList, JsonInput } from './kit.js';
import { CatalogScreen, NameFields } from './catalog_screen.js';

function useCatalogNames() {
  return useLoad(async () => {
    const kinds = ['provider', 'hardwaretype', 'imagetype', 'service'];
    const lists = await Promise.all(kinds.map((k) => call(`${k}.list`, {})));
    return Object.fromEntries(kinds.map((k, i) => [k, lists[i].entities.map((e) => e.name)]));
  }, []);
}

// Returns a copy of obj with obj[section][key] = v (v undefined or empty drops it).
function setIn(obj, section, key, v) {
  const inner = { ...(obj[section] || {}) };
  const empty = v === undefined || v === '' || (Array.isArray(v) && v.length === 0) ||
    (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);
  if (empty) delete inner[key]; else inner[key] = v;
  const next = { ...obj };
  if (Object.keys(inner).length === 0) delete next[section]; else next[section] = inner;
  return next;
}

// A count as typed: a number when it reads as one, else the text (the server
// explains what is wrong with it).
function count(text) {
  if (text === '') return undefined;
  return /^\d+$/.test(text) ? Number(text) : text;
}

function CountInput({ id, value, onChange, label }) {
  return html`<input id=${id} class="count" type="text" inputmode="numeric" aria-label=${label}
    value=${value ?? ''} onInput=${(e) => onChange(count(e.target.value.trim()))} />`;
}

function Compatibility({ value, onChange, names }) {
  const compat = value.compatibility || {};
  const set = (key, list) => onChange({ ...value, compatibility: { ...compat, [key]: list } });
  return html`<fieldset><legend>Compatibility</legend>
    <${Field} label="Services" help="what a cluster of this template may run (required)">
      <${CheckList} name="compat-services" options=${names.service} value=${compat.services} onChange=${(l) => set('services', l)} /></${Field}>
    <${Field} label="Hardware types" help="none chosen: every hardware type">
      <${CheckList} name="compat-hardwaretypes" options=${names.hardwaretype} value=${compat.hardwaretypes} onChange=${(l) => set('hardwaretypes', l)} /></${Field}>
    <${Field} label="Image types" help="none chosen: every image type">
      <${CheckList} name="compat-imagetypes" options=${names.imagetype} value=${compat.imagetypes} onChange=${(l) => set('imagetypes', l)} /></${Field}>
  </fieldset>`;
}

function Select({ id, value, options, onChange }) {
  const all = [...new Set([...(options || []), ...(value ? [value] : [])])];
  return html`<select id=${id} value=${value || ''} onChange=${(e) => onChange(e.target.value || undefined)}>
    <option value="">(none)</option>${all.map((o) => html`<option value=${o}>${o}</option>`)}</select>`;
}

function Defaults({ value, onChange, names }) {
  const defaults = value.defaults || {};
  const compat = value.compatibility || {};
  const set = (key, v) => onChange(setIn(value, 'defaults', key, v));
  const orAll = (list, all) => (list && list.length ? list : all);
  return html`<fieldset><legend>Defaults</legend>
    <${Field} label="Services" help="what a cluster gets when the user names none">
      <${CheckList} name="default-services" options=${compat.services || []} value=${defaults.services} onChange=${(l) => set('services', l)} /></${Field}>
    <div class="form-grid">
    <${Field} label="Provider" forId="default-provider"><${Select} id="default-provider" value=${defaults.provider} options=${names.provider} onChange=${(v) => set('provider', v)} /></${Field}>
    <${Field} label="Hardware type" forId="default-hardwaretype"><${Select} id="default-hardwaretype" value=${defaults.hardwaretype} options=${orAll(compat.hardwaretypes, names.hardwaretype)} onChange=${(v) => set('hardwaretype', v)} /></${Field}>
    <${Field} label="Image type" forId="default-imagetype"><${Select} id="default-imagetype" value=${defaults.imagetype} options=${orAll(compat.imagetypes, names.imagetype)} onChange=${(v) => set('imagetype', v)} /></${Field}>
    </div>
    <${Field} label="DNS suffix" forId="default-dnssuffix" help="hostnames are <cluster>-<n>.<suffix>">
      <input id="default-dnssuffix" type="text" value=${defaults.dnsSuffix || ''} onInput=${(e) => set('dnsSuffix', e.target.value)} /></${Field}>
    <${Field} label="Config" forId="default-config" help="JSON; a cluster's config is merged over it">
      <${JsonInput} id="default-config" rows=${4} value=${defaults.config || {}} onChange=${(v) => set('config', v)} /></${Field}>
  </fieldset>`;
}

// mustcoexist or cantcoexist: a list of groups, each two or more services.
function Groups({ kind, help, groups, services, onChange }) {
  const list = groups || [];
  const replace = (i, group) => onChange(list.map((g, j) => (j === i ? group : g)));
  return html`<div class="groups" data-groups=${kind}>
    <h4>${kind} <small class="muted">${help}</small></h4>
    ${list.length === 0 ? html`<p class="muted">No ${kind} groups.</p>` : null}
    ${list.map((group, i) => html`<div class="group" data-group=${i}>
      <${CheckList} name=${`${kind}-${i}`} options=${services} value=${group} onChange=${(g) => replace(i, g)} />
      <button type="button" class="button small" onClick=${() => onChange(list.filter((_, j) => j !== i))}>Remove group</button>
    </div>`)}
    <button type="button" class="button" data-add-group=${kind} onClick=${() => onChange([...list, []])}>Add ${kind} group</button>
  </div>`;
}

function ServiceConstraints({ constraints, services, names, onChange }) {
  const per = constraints.services || {};
  const set = (service, next) => {
    const copy = { ...per };
    if (Object.keys(next).length === 0) delete copy[service]; else copy[service] = next;
    onChange(copy);
  };
  const setQuantity = (service, bound, v) => {
    const entry = { ...(per[service] || {}) };
    const quantities = { ...(entry.quantities || {}) };
    if (v === undefined) delete quantities[bound]; else quantities[bound] = v;
    if (Object.keys(quantities).length === 0) delete entry.quantities; else entry.quantities = quantities;
    set(service, entry);
  };
  const setTypes = (service, key, list) => {
    const entry = { ...(per[service] || {}) };
    if (list.length === 0) delete entry[key]; else entry[key] = list;
    set(service, entry);
  };
  const rows = [...new Set([...services, ...Object.keys(per)])];
  return html`<div class="table-wrap"><table class="table service-constraints">
    <thead><tr><th>Service</th><th>Min nodes</th><th>Max nodes</th><th>Only on hardware types</th><th>Only on image types</th></tr></thead>
    <tbody>${rows.map((s) => html`<tr data-service=${s}>
      <td>${s}</td>
      <td><${CountInput} id=${`q-${s}-min`} label=${`minimum nodes of ${s}`} value=${per[s]?.quantities?.min} onChange=${(v) => setQuantity(s, 'min', v)} /></td>
      <td><${CountInput} id=${`q-${s}-max`} label=${`maximum nodes of ${s}`} value=${per[s]?.quantities?.max} onChange=${(v) => setQuantity(s, 'max', v)} /></td>
      <td><${CheckList} name=${`hw-${s}`} options=${names.hardwaretype} value=${per[s]?.hardwaretypes} onChange=${(l) => setTypes(s, 'hardwaretypes', l)} /></td>
      <td><${CheckList} name=${`img-${s}`} options=${names.imagetype} value=${per[s]?.imagetypes} onChange=${(l) => setTypes(s, 'imagetypes', l)} /></td>
    </tr>`)}</tbody></table></div>`;
}

function Constraints({ value, onChange, names }) {
  const constraints = value.constraints || {};
  const services = value.compatibility?.services || [];
  const size = constraints.size || {};
  const set = (key, v) => onChange(setIn(value, 'constraints', key, v));
  const setSize = (bound, v) => {
    const next = { ...size };
    if (v === undefined) delete next[bound]; else next[bound] = v;
    set('size', next);
  };
  const layout = constraints.layout || {};
  const setLayout = (key, groups) => {
    const next = { ...layout };
    if (groups.length === 0) delete next[key]; else next[key] = groups;
    set('layout', next);
  };
  return html`<fieldset><legend>Constraints</legend>
    <${Field} label="Size" help="nodes in a cluster; empty: no bound">
      <span class="inline">min <${CountInput} id="size-min" label="minimum size" value=${size.min} onChange=${(v) => setSize('min', v)} />
      max <${CountInput} id="size-max" label="maximum size" value=${size.max} onChange=${(v) => setSize('max', v)} /></span></${Field}>
    <${Groups} kind="mustcoexist" help="a node running one of a group's services (present on the cluster) runs all of them"
      groups=${layout.mustcoexist} services=${services} onChange=${(g) => setLayout('mustcoexist', g)} />
    <${Groups} kind="cantcoexist" help="no node runs every service of a group"
      groups=${layout.cantcoexist} services=${services} onChange=${(g) => setLayout('cantcoexist', g)} />
    <h4>Per service</h4>
    <${ServiceConstraints} constraints=${constraints} services=${services} names=${names} onChange=${(per) => set('services', per)} />
  </fieldset>`;
}

function Lease({ value, onChange }) {
  const lease = value.administration?.leaseduration || {};
  const set = (key, text) => {
    const next = { ...lease };
    if (text === '') delete next[key]; else next[key] = text;
    onChange(setIn(value, 'administration', 'leaseduration', next));
  };
  const input = (key, label) => html`<${Field} label=${label} forId=${`lease-${key}`} help="e.g. 12h, 1d, 7d; 0: no limit">
    <input id=${`lease-${key}`} type="text" value=${lease[key] ?? ''} onInput=${(e) => set(key, e.target.value.trim())} /></${Field}>`;
  return html`<fieldset><legend>Lease</legend>
    <div class="form-grid">${input('initial', 'Initial')}${input('max', 'Maximum')}${input('step', 'Extension step')}</div></fieldset>`;
}

function TemplateForm({ value, onChange, isNew }) {
  const names = useCatalogNames();
  const n = names.data || { provider: [], hardwaretype: [], imagetype: [], service: [] };
  return html`<form class="entity-form template-form" onSubmit=${(e) => e.preventDefault()}>
    <${NameFields} value=${value} onChange=${onChange} isNew=${isNew} Field=${Field} />
    <${Compatibility} value=${value} onChange=${onChange} names=${n} />
    <${Defaults} value=${value} onChange=${onChange} names=${n} />
    <${Constraints} value=${value} onChange=${onChange} names=${n} />
    <${Lease} value=${value} onChange=${onChange} />
  </form>`;
}

export default function TemplatesScreen() {
  return html`<${CatalogScreen} kind="clustertemplate" title="Cluster templates" Form=${TemplateForm}
    intro="What users create clusters from: compatible services and types, defaults, layout constraints and the lease."
    blank=${{ name: '', compatibility: { services: [] }, defaults: {}, constraints: {} }} />`;
}
