// How the admin screens talk to the gateway: the shell's api wrapper, plus the
// tenant a superadmin acts in (sent as X-Weft-Tenant on every request, the
// user screens' too) and a way for screens to reload when it changes.
import { api } from './deps.js';

const tenantListeners = new Set();

// The tenant a superadmin looks at; '' means their own (the session's).
export function getActingTenant() { return api.tenantOverrideValue() || ''; }
export function setActingTenant(name) {
  api.setTenantOverride(name || null);
  for (const listener of tenantListeners) listener(getActingTenant());
}
export function onActingTenant(listener) {
  tenantListeners.add(listener);
  return () => tenantListeners.delete(listener);
}

// Runs an op in the acting tenant; resolves to the reply body, rejects with an
// ApiError carrying weftd's code and sentence.
export function call(op, body = {}) { return api.call(op, body); }

// One PUT of the file's bytes; onProgress(sent, total) as the browser sends them.
export function uploadResource(type, name, file, onProgress) {
  return api.uploadResource(type, name, file, onProgress);
}
