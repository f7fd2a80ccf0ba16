// A job's tasks drawn as a graph in SVG: one column per depth (the longest
// chain of predecessors before a task), edges from each task to those that
// wait for it, boxes coloured by state.
import { html, useMemo } from './html.js';

const COL = 200;
const ROW = 44;
const BOX_W = 172;
const BOX_H = 34;
const PAD = 16;

export const STATE_COLOURS = {
  succeeded: ['#dcfce7', '#16a34a'],
  leased: ['#dbeafe', '#2563eb'],
  running: ['#dbeafe', '#2563eb'],
  queued: ['#fef9c3', '#ca8a04'],
  waiting: ['#f1f5f9', '#94a3b8'],
  failed: ['#fee2e2', '#dc2626'],
  cancelled: ['#e5e7eb', '#6b7280'],
};

export function layoutDag(tasks) {
  const byId = new Map(tasks.map((t) => [String(t.id), t]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (t) => {
    const k = String(t.id);
    if (depth.has(k)) return depth.get(k);
    if (visiting.has(k)) return 0; // a cycle cannot happen in a plan; do not hang if it does
    visiting.add(k);
    let d = 0;
    for (const p of t.after || []) {
      const pt = byId.get(String(p));
      if (pt) d = Math.max(d, depthOf(pt) + 1);
    }
    visiting.delete(k);
    depth.set(k, d);
    return d;
  };
  const columns = [];
  for (const t of tasks) {
    const d = depthOf(t);
    (columns[d] = columns[d] || []).push(t);
  }
  const pos = new Map();
  columns.forEach((col, c) => {
    col.sort((a, b) => String(a.node).localeCompare(String(b.node), undefined, { numeric: true })
      || String(a.service || '').localeCompare(String(b.service || '')));
    col.forEach((t, r) => pos.set(String(t.id), { x: PAD + c * COL, y: PAD + r * ROW }));
  });
  const rows = Math.max(1, ...columns.map((c) => (c ? c.length : 0)));
  const edges = [];
  for (const t of tasks) {
    for (const p of t.after || []) {
      const a = pos.get(String(p));
      const b = pos.get(String(t.id));
      if (a && b) edges.push({ from: String(p), to: String(t.id), a, b });
    }
  }
  return { pos, edges, width: PAD * 2 + columns.length * COL - (COL - BOX_W), height: PAD * 2 + rows * ROW - (ROW - BOX_H) };
}

function shortNode(node) { return String(node || '').split('.')[0]; }

export function TaskGraph({ tasks, states, selected, onSelect }) {
  const layout = useMemo(() => layoutDag(tasks), [tasks]);
  const stateOf = (t) => (states && states[String(t.id)]) || t.state;
  return html`<div class="dag-wrap" data-testid="dag">
    <svg width=${layout.width} height=${layout.height} viewBox=${`0 0 ${layout.width} ${layout.height}`} role="img"
      aria-label=${`Task graph of ${tasks.length} tasks`}>
      <defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto">
        <path d="M0,0 L8,4 L0,8 z" fill="#b6c2cf" /></marker></defs>
      ${layout.edges.map((e) => {
        const x1 = e.a.x + BOX_W; const y1 = e.a.y + BOX_H / 2; const x2 = e.b.x - 2; const y2 = e.b.y + BOX_H / 2;
        const mx = (x1 + x2) / 2;
        return html`<path class="dag-edge" d=${`M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`} marker-end="url(#arrow)" />`;
      })}
      ${tasks.map((t) => {
        const p = layout.pos.get(String(t.id));
        const st = stateOf(t);
        const [fill, stroke] = STATE_COLOURS[st] || STATE_COLOURS.waiting;
        const title = `${t.action}${t.service ? ' ' + t.service : ''} on ${t.node}: ${st}`;
        return html`<g class=${'dag-node' + (String(selected) === String(t.id) ? ' selected' : '')} transform=${`translate(${p.x},${p.y})`}
            data-state=${st} data-task=${t.id} onClick=${() => onSelect && onSelect(t.id)}>
          <title>${title}</title>
          <rect width=${BOX_W} height=${BOX_H} rx="6" fill=${fill} stroke=${stroke} />
          <text x="8" y="14" font-weight="700" fill="#1c2530">${t.action}${t.service ? html`<tspan font-weight="400"> ${t.service.slice(0, 16)}</tspan>` : null}</text>
          <text x="8" y="27" fill="#4a5869">${shortNode(t.node)}${t.attempt > 1 ? ` · try ${t.attempt}` : ''}</text>
        </g>`;
      })}
    </svg>
  </div>`;
}

export function DagLegend() {
  return html`<div class="legend">${Object.entries(STATE_COLOURS).filter(([k]) => k !== 'running').map(([k, [fill, stroke]]) => html`
    <span><i style=${`background:${fill};border:1px solid ${stroke}`}></i>${k}</span>`)}</div>`;
}
