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
