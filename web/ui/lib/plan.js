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

// Reads the config box: an object, or an error sentence with line and column.
export function parseConfig(text) {
  const t = (text || '').trim();
  if (!t) return { value: undefined };
  try {
    const v = JSON.parse(t);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return { error: 'The config must be a JSON object, like {"nginx": {"port": "8080"}}.' };
    return { value: v };
  } catch (e) {
    const m = /position (\d+)/.exec(e.message);
    if (m) {
      const before = t.slice(0, Number(m[1]));
      const line = before.split('\n').length;
      const column = before.length - before.lastIndexOf('\n');
      return { error: `The config is not valid JSON at line ${line}, column ${column}.` };
    }
    return { error: `The config is not valid JSON: ${e.message}.` };
  }
}
