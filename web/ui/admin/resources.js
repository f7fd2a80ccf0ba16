// Resources: files plugins use (scripts, archives, Lua plugins), versioned
// per tenant and plugin type. Upload with a progress bar, then stage a
// version, sync (every staged version becomes active), recall, delete.
import { html, useState, StatusBadge, ProgressBar } from './deps.js';
import { call, uploadResource } from './client.js';
import { useLoad, useAction, Loading, ErrorText, ConfirmButton, formatTime, formatBytes } from './kit.js';
import { usePlugins } from './plugin_fields.js';

function UploadForm({ onUploaded }) {
  const plugins = usePlugins();
  const [type, setType] = useState('');
  const [name, setName] = useState('');
  const [file, setFile] = useState(null);
  const [progress, setProgress] = useState(null); // {sent, total}
  const [done, setDone] = useState(null);
  const action = useAction();
  const types = [...new Set(['lua-plugin', ...(plugins.data || []).map((p) => p.type)])];
  const submit = (e) => {
    e.preventDefault();
    setDone(null);
    setProgress({ sent: 0, total: file.size });
    action.run(async () => {
      const reply = await uploadResource(type, name || file.name, file, (sent, total) => setProgress({ sent, total }));
      setProgress({ sent: file.size, total: file.size });
      setDone(reply);
      onUploaded();
    });
  };
  const waiting = action.busy && progress && progress.total && progress.sent >= progress.total;
  return html`<form class="card card-body stack upload-form" onSubmit=${submit}>
    <h2>Upload</h2>
    <div class="row">
      <label class="field">Type <input type="text" name="resource-type" list="resource-types" required value=${type}
        placeholder="plugin type, or lua-plugin" onInput=${(e) => setType(e.target.value.trim())} /></label>
      <datalist id="resource-types">${types.map((t) => html`<option value=${t} />`)}</datalist>
      <label class="field">File <input type="file" name="resource-file" required onChange=${(e) => { const f = e.target.files[0] || null; setFile(f); if (f && !name) setName(f.name); }} /></label>
      <label class="field">Name <input type="text" name="resource-name" value=${name} placeholder="the file's name" onInput=${(e) => setName(e.target.value.trim())} /></label>
    </div>
    <div class="row"><button type="submit" class="button primary" disabled=${action.busy || !file || !type}>Upload</button></div>
    ${progress ? html`<div class="upload-progress" data-testid="upload-progress">
      <${ProgressBar} done=${progress.sent} total=${progress.total} status=${action.error ? 'failed' : undefined}
        label=${`${formatBytes(progress.sent)} of ${formatBytes(progress.total)} sent${waiting ? '; the server is checking the digest…' : ''}`} /></div>` : null}
    <${ErrorText} error=${action.error} />
    ${done ? html`<p class="info-note" role="status">Uploaded ${done.type}/${done.name} as version ${done.version} (${formatBytes(done.size)}, ${done.digest}); stage it and sync to make it active.</p>` : null}
  </form>`;
}

function stateBadge(state) { return html`<${StatusBadge} status=${state} />`; }

function ResourceCard({ resource, onChanged }) {
  const action = useAction();
  const op = (name, body) => action.run(async () => { await call(name, { type: resource.type, name: resource.name, ...body }); onChanged(); });
  return html`<div class="card card-body stack resource" data-resource=${`${resource.type}/${resource.name}`}>
    <h3>${resource.type}/${resource.name}
      <small class="muted">active: ${resource.active ?? 'none'}, staged: ${resource.staged ?? 'none'}</small></h3>
    <div class="table-wrap"><table class="table versions">
      <thead><tr><th>Version</th><th>State</th><th>Size</th><th>Digest</th><th>Uploaded</th><th>By</th><th></th></tr></thead>
      <tbody>${resource.versions.map((v) => html`<tr data-version=${v.version}>
        <td>${v.version}</td><td>${stateBadge(v.state)}</td><td>${formatBytes(v.size)}</td>
        <td><code title=${v.digest}>${v.digest.slice(0, 19)}…</code></td><td>${formatTime(v.created_at_ms)}</td><td>${v.created_by || ''}</td>
        <td class="actions">
          ${v.state === 'active' ? html`<${ConfirmButton} label="Recall" confirmLabel="Recall (no version active)" onConfirm=${() => op('resource.recall', {})} />` : html`
            ${v.state !== 'staged' ? html`<button type="button" class="button" disabled=${action.busy} onClick=${() => op('resource.stage', { version: v.version })}>Stage</button>` : null}
            <${ConfirmButton} label="Delete" confirmLabel=${`Delete version ${v.version}`} onConfirm=${() => op('resource.delete', { version: v.version })} />`}
        </td></tr>`)}</tbody></table></div>
    ${resource.active ? null : html`<${ConfirmButton} label="Delete resource" confirmLabel=${`Delete ${resource.type}/${resource.name} and every version`} onConfirm=${() => op('resource.delete', {})} />`}
    <${ErrorText} error=${action.error} />
  </div>`;
}

export default function ResourcesScreen() {
  const resources = useLoad(() => call('resource.list', {}), []);
  const sync = useAction();
  const [synced, setSynced] = useState(null);
  const staged = (resources.data?.resources || []).filter((r) => r.staged).length;
  const doSync = () => sync.run(async () => { setSynced(await call('resource.sync', {})); resources.reload(); });
  return html`<section class="page admin-resources">
    <h1>Resources</h1>
    <p class="muted">A task gets the versions active when it is taken; a sync never changes what a running task uses.</p>
    <${UploadForm} onUploaded=${resources.reload} />
    <div class="row toolbar">
      <button type="button" class="button primary" disabled=${sync.busy} onClick=${doSync}>Sync (${staged} staged)</button>
      <${ErrorText} error=${sync.error} />
      ${synced ? html`<span class="info-note" role="status">${synced.activated.length === 0 ? 'Nothing was staged.'
        : synced.activated.map((a) => `${a.type}/${a.name} version ${a.version} active${a.retired ? ` (version ${a.retired} retired)` : ''}`).join('; ')}</span>` : null}
    </div>
    <${Loading} state=${resources} />
    ${resources.data ? (resources.data.resources.length === 0 ? html`<p class="muted">No resources yet.</p>`
      : resources.data.resources.map((r) => html`<${ResourceCard} key=${`${r.type}/${r.name}`} resource=${r} onChanged=${resources.reload} />`)) : null}
  </section>`;
}
