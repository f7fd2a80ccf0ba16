// The plan a create (or any dry run) would carry out, summed up as the CLI
// does: identical nodes grouped (`3 × small debian12 [base, nginx]`), tasks,
// stages.
import { html } from './html.js';
import { plural } from './format.js';
import { TaskGraph } from './dag.js';

export function groupNodes(nodes) {
  const groups = new Map();
  for (const n of nodes || []) {
    const services = [...(n.services || [])].sort();
    const key = [n.hardwaretype, n.imagetype, services.join(',')].join('|');
    const g = groups.get(key) || { count: 0, hardwaretype: n.hardwaretype, imagetype: n.imagetype, services, hostnames: [] };
    g.count += 1;
    g.hostnames.push(n.hostname);
    groups.set(key, g);
  }
  return [...groups.values()];
}

export function PlanSummary({ plan }) {
  const nodes = plan.layout?.nodes || [];
  const groups = groupNodes(nodes);
  const actions = {};
  for (const t of plan.tasks || []) actions[t.action] = (actions[t.action] || 0) + 1;
  return html`<div class="stack" data-testid="plan-summary">
    <div class="row"><strong>${plural(nodes.length, 'node')}</strong><span class="muted">·</span>
      <span>${plural((plan.tasks || []).length, 'task')}</span><span class="muted">·</span>
      <span>${plural((plan.stages || []).length, 'stage')}</span></div>
    <div class="plan-groups">${groups.map((g) => html`<div class="plan-group">
      <span class="plan-count">${g.count} ×</span><span>${g.hardwaretype}</span><span>${g.imagetype}</span>
      <span class="chips">${g.services.map((s) => html`<span class="chip">${s}</span>`)}</span>
      <span class="muted" title=${g.hostnames.join(', ')}>${g.hostnames[0]}${g.hostnames.length > 1 ? ` … ${g.hostnames[g.hostnames.length - 1]}` : ''}</span>
    </div>`)}</div>
    <div class="chips">${Object.entries(actions).map(([a, n]) => html`<span class="chip">${a} ${n}</span>`)}</div>
    ${(plan.tasks || []).length ? html`<details class="plan-graph"><summary>Task graph</summary>
      <${TaskGraph} tasks=${plan.tasks.map((t) => ({ ...t, state: 'waiting' }))} /></details>` : null}
  </div>`;
}

// What each kind of task does, in the order a node goes through them.
const DONE = {
  CREATE: 'created', CONFIRM: 'confirmed', BOOTSTRAP: 'bootstrapped', INSTALL: 'installed', CONFIGURE: 'configured',
  INITIALIZE: 'initialized', START: 'started', STOP: 'stopped', REMOVE: 'removed', DELETE: 'deleted',
};
const ORDER = Object.keys(DONE);

// What a change's plan does to the cluster, from its tasks: the nodes it
// creates and deletes, and for each service what happens to it on which nodes.
export function planChanges(plan) {
  const created = new Set();
  const deleted = new Set();
  const services = new Map();
  for (const t of plan.tasks || []) {
    const action = String(t.action || '').toUpperCase();
    if (!t.service) {
      if (action === 'CREATE') created.add(t.node);
      if (action === 'DELETE') deleted.add(t.node);
      continue;
    }
    const actions = services.get(t.service) || new Map();
    actions.set(action, (actions.get(action) || new Set()).add(t.node));
    services.set(t.service, actions);
  }
  const rank = (a) => (ORDER.includes(a) ? ORDER.indexOf(a) : ORDER.length);
  return {
    created: [...created].sort(),
    deleted: [...deleted].sort(),
    services: [...services.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([service, actions]) => ({
      service,
      actions: [...actions.entries()].sort(([a], [b]) => rank(a) - rank(b))
        .map(([action, nodes]) => ({ action, done: DONE[action] || action.toLowerCase(), nodes: [...nodes].sort() })),
    })),
  };
}

// A JSON merge patch (RFC 7386) applied to a copy of `target`: what a
// reconfigure makes of the cluster's config.
export function mergePatch(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const nodeList = (nodes) => html`<span class="mono" title=${nodes.join(', ')}>${nodes.length > 4
  ? `${nodes.slice(0, 3).join(', ')} and ${nodes.length - 3} more` : nodes.join(', ')}</span>`;

// A change's dry run as what it changes: nodes deleted and added, what happens
// to each service, and for a reconfigure the config it applies.
export function PlanChange({ plan, config }) {
  const c = planChanges(plan);
  const nothing = !c.created.length && !c.deleted.length && !c.services.length;
  return html`<div class="stack" data-testid="plan-change">
    <strong>What changes</strong>
    ${c.deleted.length ? html`<div class="warn-note" data-testid="plan-deleted">${`Deletes ${plural(c.deleted.length, 'node')}: `}${
      nodeList(c.deleted)}</div>` : null}
    ${c.created.length ? html`<div data-testid="plan-created">${`Adds ${plural(c.created.length, 'node')}: `}${nodeList(c.created)}</div>` : null}
    ${c.services.length ? html`<table class="table" data-testid="plan-services"><thead><tr><th>Service</th><th>What happens</th></tr></thead>
      <tbody>${c.services.map((s) => html`<tr><td>${s.service}</td><td class="wrap">${s.actions.map((a, i) => html`${i ? ' · ' : ''}${
        `${a.done} on ${plural(a.nodes.length, 'node')}`}`)}</td></tr>`)}</tbody></table>` : null}
    ${nothing ? html`<div class="muted">No task runs on the nodes.</div>` : null}
    ${config ? html`<div class="grid-2" data-testid="plan-config">
      <div><div class="field-label">Config applied (merged into the cluster's)</div><pre class="output">${JSON.stringify(config.patch, null, 2)}</pre></div>
      <div><div class="field-label">The cluster's config afterwards</div><pre class="output">${JSON.stringify(config.after, null, 2)}</pre></div>
    </div>` : null}
  </div>`;
}

// Where JSON text stops being valid: the offset of the first character a
// JSON parser cannot take (browsers' own messages do not always say).
export function jsonErrorOffset(text) {
  let i = 0;
  const fail = () => { throw i; };
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const literal = (word) => { if (text.startsWith(word, i)) i += word.length; else fail(); };
  const string = () => {
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') i++;
      else if (text[i] < ' ') fail();
      i++;
    }
    if (i >= text.length) fail();
    i++;
  };
  const number = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) fail();
    i += m[0].length;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++; ws();
      if (text[i] === '}') { i++; return; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        string(); ws();
        if (text[i] !== ':') fail();
        i++; value(); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return; }
        fail();
      }
    } else if (c === '[') {
      i++; ws();
      if (text[i] === ']') { i++; return; }
      for (;;) {
        value(); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return; }
        fail();
      }
    } else if (c === '"') string();
    else if (c === 't') literal('true');
    else if (c === 'f') literal('false');
    else if (c === 'n') literal('null');
    else number();
  };
  try {
    value(); ws();
    return i < text.length ? i : -1;
  } catch (at) {
    return at;
  }
}

// Reads the config box: an object, or an error sentence with line and column.
export function parseConfig(text) {
  const t = (text || '').trim();
  if (!t) return { value: undefined };
  let v;
  try {
    v = JSON.parse(t);
  } catch {
    const at = Math.max(0, jsonErrorOffset(t));
    const before = t.slice(0, at);
    const line = before.split('\n').length;
    const column = at - before.lastIndexOf('\n');
    return { error: `The config is not valid JSON at line ${line}, column ${column}.` };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { error: 'The config must be a JSON object, like {"nginx": {"port": "8080"}}.' };
  return { value: v };
}
