// Catalog import and export, and catalog.check's findings. An export is one
// JSON file, {"providers":[...], "hardwaretypes":[...], ...}; an import takes
// such a file, or the JSON files of a catalog directory (providers/x.json, as
// `weft catalog export` writes them). Like `weft catalog import`, an entity the
// tenant already has unchanged keeps its version.
import { html, useState } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, JsonView, downloadJson } from './kit.js';

const KINDS = [
  ['provider', 'providers'], ['hardwaretype', 'hardwaretypes'], ['imagetype', 'imagetypes'],
  ['service', 'services'], ['clustertemplate', 'clustertemplates'],
];
const KIND_OF_FOLDER = Object.fromEntries(KINDS.map(([kind, folder]) => [folder, kind]));

// Key order does not matter to the server, which stores keys sorted.
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  return v;
}
const same = (a, b) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

async function exportCatalog() {
  const bundle = {};
  for (const [kind, folder] of KINDS) {
    bundle[folder] = [];
    let page = { with_entities: true };
    for (;;) {
      const reply = await call(`${kind}.list`, page);
      for (const e of reply.entities) bundle[folder].push(e.entity);
      if (typeof reply.next !== 'string' || reply.entities.length === 0) break;
      page = { with_entities: true, after: reply.next };
    }
  }
  return bundle;
}

// Reads the chosen files into [{kind, entity, file}] and [{file, reason}] skipped.
async function readFiles(files) {
  const entities = [];
  const skipped = [];
  for (const file of files) {
    const path = file.webkitRelativePath || file.name;
    if (!path.endsWith('.json')) { skipped.push({ file: path, reason: 'not a .json file' }); continue; }
    let doc;
    try { doc = JSON.parse(await file.text()); } catch (e) {
      skipped.push({ file: path, reason: `malformed JSON: ${e.message}` });
      continue;
    }
    const parts = path.split('/');
    const folderKind = parts.length >= 2 ? KIND_OF_FOLDER[parts[parts.length - 2]] : undefined;
    if (folderKind) {
      entities.push({ kind: folderKind, entity: doc, file: path });
    } else if (doc && typeof doc === 'object' && KINDS.some(([, folder]) => Array.isArray(doc[folder]))) {
      for (const [kind, folder] of KINDS) {
        (doc[folder] || []).forEach((entity, i) => entities.push({ kind, entity, file: `${path}: ${folder}[${i}]` }));
      }
    } else {
      skipped.push({ file: path, reason: 'neither an exported catalog nor in a folder named providers, hardwaretypes, imagetypes, services or clustertemplates' });
    }
  }
  return { entities, skipped };
}

async function importEntities(entities) {
  const result = { imported: [], unchanged: [], refused: [] };
  for (const { kind, entity, file } of entities) {
    const name = entity?.name;
    if (typeof name === 'string' && name !== '') {
      try {
        const current = await call(`${kind}.get`, { name });
        if (same(current.entity, entity)) { result.unchanged.push({ kind, name, version: current.version }); continue; }
      } catch (e) {
        if (e.code !== 'NOT_FOUND' || e.details?.tenant) throw e; // a missing tenant refuses every put too
      }
    }
    try {
      const reply = await call(`${kind}.put`, entity);
      // weftd compares secrets in the clear: an entity equal to its latest version keeps it.
      if (reply.unchanged) { result.unchanged.push({ kind, name: reply.name, version: reply.version }); continue; }
      result.imported.push({ kind, name: reply.name, version: reply.version, warnings: reply.warnings || [] });
    } catch (e) {
      if (e.code === 'UNAVAILABLE') throw e;
      result.refused.push({ file, reason: e.message });
    }
  }
  return result;
}

function ImportPanel({ onDone }) {
  const [files, setFiles] = useState([]);
  const [report, setReport] = useState(null);
  const action = useAction();
  const run = () => action.run(async () => {
    const read = await readFiles(files);
    const result = await importEntities(read.entities);
    setReport({ ...result, skipped: read.skipped });
    onDone();
  });
  return html`<div class="card card-body stack">
    <h2>Import</h2>
    <p class="muted">Choose an exported catalog file, or the JSON files of a catalog directory.</p>
    <p><label>Files <input type="file" id="catalog-files" accept=".json,application/json" multiple
      onChange=${(e) => setFiles([...e.target.files])} /></label>
      <label>or a folder <input type="file" id="catalog-folder" webkitdirectory
      onChange=${(e) => setFiles([...e.target.files])} /></label></p>
    <button type="button" class="button primary" disabled=${action.busy || files.length === 0} onClick=${run}>Import ${files.length} file${files.length === 1 ? '' : 's'}</button>
    <${ErrorText} error=${action.error} />
    ${report ? html`<div class="import-report" role="status">
      <p>${report.imported.length} imported, ${report.unchanged.length} unchanged, ${report.skipped.length} skipped, ${report.refused.length} refused.</p>
      <ul>
        ${report.imported.map((i) => html`<li>imported ${i.kind} '${i.name}' (version ${i.version})
          ${i.warnings.map((w) => html`<div class="warning">warning: ${w}</div>`)}</li>`)}
        ${report.unchanged.map((u) => html`<li class="muted">unchanged ${u.kind} '${u.name}' (version ${u.version})</li>`)}
        ${report.skipped.map((s) => html`<li class="muted">skipped ${s.file}: ${s.reason}</li>`)}
        ${report.refused.map((r) => html`<li class="error">refused ${r.file}: ${r.reason}</li>`)}
      </ul></div>` : null}
  </div>`;
}

function CheckPanel({ check }) {
  return html`<div class="card card-body stack">
    <div class="row"><h2>Check</h2><span class="spacer"></span><button type="button" class="button small" onClick=${check.reload}>Check again</button></div>
    <${Loading} state=${check} />
    ${check.data ? html`${check.data.problems === 0 ? html`<p class="ok">No problems: every reference resolves and a live host runs every plugin type.</p>` : html`
      <p>${check.data.problems} problem${check.data.problems === 1 ? '' : 's'}:</p>
      <ul class="check-problems">
        ${[...check.data.dangling, ...check.data.unrunnable, ...check.data.fields].map((p) => html`<li>${p.message}</li>`)}
      </ul>`}
    ${(check.data.warnings || []).length ? html`<p>Not checked or worth a look (not problems):</p>
      <ul class="check-problems">${check.data.warnings.map((w) => html`<li>${w.message}</li>`)}</ul>` : null}` : null}
  </div>`;
}

export default function CatalogScreen() {
  const check = useLoad(() => call('catalog.check', {}), []);
  const exporting = useAction();
  const [preview, setPreview] = useState(null);
  const doExport = () => exporting.run(async () => {
    const bundle = await exportCatalog();
    setPreview(bundle);
    downloadJson('weft-catalog.json', bundle);
  });
  return html`<section class="page admin-catalog-io">
    <h1>Catalog import and export</h1>
    <div class="card card-body stack">
      <h2>Export</h2>
      <p class="muted">The latest version of every entity, as one JSON file (sensitive fields stay sealed).</p>
      <button type="button" class="button primary" disabled=${exporting.busy} onClick=${doExport}>Export the catalog</button>
      <${ErrorText} error=${exporting.error} />
      ${preview ? html`<details><summary>What was exported (${KINDS.map(([, f]) => `${preview[f].length} ${f}`).join(', ')})</summary>
        <${JsonView} value=${preview} /></details>` : null}
    </div>
    <${ImportPanel} onDone=${check.reload} />
    <${CheckPanel} check=${check} />
  </section>`;
}
