// Reading the tenant's catalog: every entity of a kind with its body, a page
// (up to 500) per request, as `weft catalog export` does.
import * as api from './api.js';

export async function listEntities(kind) {
  const out = [];
  let after;
  for (;;) {
    const body = { with_entities: true };
    if (after) body.after = after;
    const page = await api.call(`${kind}.list`, body);
    out.push(...(page.entities || []));
    if (!page.next) return out;
    after = page.next;
  }
}

export function templateSizeRange(t) {
  const size = t?.constraints?.size || {};
  return { min: size.min ?? 1, max: size.max ?? null };
}

// A template's leaseduration in words; "0" (or none) means no limit.
export function leaseText(lease) {
  const set = (v) => v !== undefined && v !== null && v !== '' && String(v) !== '0';
  if (!lease || !set(lease.initial)) return set(lease?.max) ? `no lease at first, at most ${lease.max}` : 'no lease';
  return `${lease.initial}${set(lease.max) ? `, at most ${lease.max}` : ''}`;
}
