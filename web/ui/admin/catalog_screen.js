// The screen every catalog kind shares: the list of entities, one entity's
// form or JSON, save as a new version, delete after a confirmation. Each kind
// brings only its form (providers.js, services.js, ...).
import { html, useState, useEffect } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, JsonInput, JsonView, ConfirmButton, formatTime } from './kit.js';

export function CatalogScreen({ kind, title, intro, Form, blank }) {
  const list = useLoad(() => call(`${kind}.list`, {}), [kind]);
  const [selected, setSelected] = useState(null); // null, {isNew:true} or {name}
  const [saved, setSaved] = useState(null);

  const open = (name) => { setSaved(null); setSelected({ name }); };
  const afterSave = (reply) => { setSaved(reply); setSelected({ name: reply.name }); list.reload(); };
  const afterDelete = (reply) => { setSaved(null); setSelected(null); list.reload(); return reply; };

  return html`<section class="page admin-catalog" data-kind=${kind}>
    <h1>${title}</h1>
    ${intro ? html`<p class="muted">${intro}</p>` : null}
    <div class="row toolbar">
      <button type="button" class="button primary" onClick=${() => { setSaved(null); setSelected({ isNew: true }); }}>New ${kind}</button>
    </div>
    <${Loading} state=${list} />
    ${list.data ? html`<div class="table-wrap"><table class="table entity-list">
      <thead><tr><th>Name</th><th>Version</th><th>Changed</th></tr></thead>
      <tbody>${list.data.entities.length === 0
        ? html`<tr><td colspan="3" class="muted">No ${kind} yet.</td></tr>`
        : list.data.entities.map((e) => html`<tr class=${selected?.name === e.name ? 'selected' : ''}>
            <td><button type="button" class="entity-link" data-entity=${e.name} onClick=${() => open(e.name)}>${e.name}</button></td>
            <td>${e.version}</td><td>${formatTime(e.created_at_ms)}</td></tr>`)}
      </tbody></table></div>` : null}
    ${saved ? html`<div class="info-note saved" role="status">${saved.unchanged
      ? `No change: ${kind} '${saved.name}' stays version ${saved.version}.`
      : `Saved ${kind} '${saved.name}' as version ${saved.version}.`}
      ${(saved.warnings || []).map((w) => html`<div class="warning">warning: ${w}</div>`)}</div>` : null}
    ${selected ? html`<${EntityEditor} key=${selected.isNew ? '(new)' : `${selected.name}@${saved?.version ?? ''}`} kind=${kind} Form=${Form}
      name=${selected.name} blank=${blank} onSaved=${afterSave} onDeleted=${afterDelete}
      onClose=${() => setSelected(null)} />` : null}
  </section>`;
}

function EntityEditor({ kind, name, Form, blank, onSaved, onDeleted, onClose }) {
  const isNew = !name;
  const current = useLoad(() => (isNew ? Promise.resolve(null) : call(`${kind}.get`, { name })), [kind, name]);
  const [draft, setDraft] = useState(isNew ? structuredClone(blank) : null);
  const [view, setView] = useState('form');
  const action = useAction();

  useEffect(() => {
    if (current.data) setDraft(structuredClone(current.data.entity));
  }, [current.data]);

  if (!isNew && !draft) return html`<${Loading} state=${current} />`;

  const save = () => action.run(async () => onSaved(await call(`${kind}.put`, draft)));
  const remove = () => action.run(async () => onDeleted(await call(`${kind}.delete`, { name })));

  return html`<div class="entity-editor card card-body stack">
    <header class="editor-head">
      <h2>${isNew ? `New ${kind}` : `${kind} '${name}'`}
        ${current.data ? html` <small class="muted">version ${current.data.version}, ${formatTime(current.data.created_at_ms)}</small>` : null}</h2>
      <div class="tabs" role="tablist">
        <button type="button" role="tab" aria-selected=${view === 'form'} class=${view === 'form' ? 'tab active' : 'tab'} onClick=${() => setView('form')}>Form</button>
        <button type="button" role="tab" aria-selected=${view === 'json'} class=${view === 'json' ? 'tab active' : 'tab'} onClick=${() => setView('json')}>JSON</button>
        <button type="button" role="tab" aria-selected=${view === 'stored'} class=${view === 'stored' ? 'tab active' : 'tab'} disabled=${isNew} onClick=${() => setView('stored')}>Stored</button>
      </div>
    </header>
    ${view === 'form' ? html`<${Form} value=${draft} onChange=${setDraft} isNew=${isNew} stored=${current.data?.entity} />` : null}
    ${view === 'json' ? html`<${JsonInput} rows=${20} value=${draft} onChange=${setDraft} />` : null}
    ${view === 'stored' && current.data ? html`<${JsonView} value=${current.data.entity} />` : null}
    <${ErrorText} error=${action.error} />
    <div class="actions">
      <button type="button" class="button primary" disabled=${action.busy || view === 'stored'} onClick=${save}>Save</button>
      <button type="button" class="button" onClick=${onClose}>Close</button>
      ${isNew ? null : html`<${ConfirmButton} label="Delete" confirmLabel=${`Delete ${kind} '${name}'`} disabled=${action.busy} onConfirm=${remove} />`}
    </div>
  </div>`;
}

// A text input bound to value[key] (a string, '' drops the key).
export function TextProp({ value, onChange, prop, id, placeholder }) {
  return html`<input id=${id} type="text" value=${value[prop] ?? ''} placeholder=${placeholder || ''}
    onInput=${(e) => {
      const next = { ...value };
      if (e.target.value === '') delete next[prop]; else next[prop] = e.target.value;
      onChange(next);
    }} />`;
}

// Name and description, the two fields every kind has.
export function NameFields({ value, onChange, isNew, Field }) {
  return html`
    <${Field} label="Name" forId="entity-name" help=${isNew ? 'letters, digits, . _ -; also the file name in an export' : 'a new name makes a new entity'}>
      <${TextProp} id="entity-name" value=${value} onChange=${onChange} prop="name" /></${Field}>
    <${Field} label="Description" forId="entity-description">
      <${TextProp} id="entity-description" value=${value} onChange=${onChange} prop="description" /></${Field}>`;
}
