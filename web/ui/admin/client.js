// How the admin screens talk to the gateway: every op as POST /api/v1/<op>,
// resource uploads as a PUT whose progress the caller sees, and the tenant a
// superadmin acts in (sent as X-Weft-Tenant) chosen once for every screen.
import { api } from './deps.js';

let actingTenant = '';
const tenantListeners = new Set();

// The tenant a superadmin looks at; '' means their own (the session's).
export function getActingTenant() { return actingTenant; }
export function setActingTenant(name) {
  actingTenant = name || '';
  for (const listener of tenantListeners) listener(actingTenant);
}
export function onActingTenant(listener) {
  tenantListeners.add(listener);
  return () => tenantListeners.delete(listener);
}

function tenantHeaders() {
  return actingTenant ? { 'X-Weft-Tenant': actingTenant } : {};
}

// Calls an op in the acting tenant; resolves to the reply body, rejects with
// the gateway's error ({code, message, details}) as the shell's wrapper gives it.
export function call(op, body = {}, { tenant } = {}) {
  const headers = tenant === undefined ? tenantHeaders() : (tenant ? { 'X-Weft-Tenant': tenant } : {});
  return api.call(op, body, { headers });
}

// The current session ({user, tenant, role, ...}) as the shell keeps it.
export function session() { return api.session ? api.session() : null; }

export function isSuperadmin() { return session()?.role === 'superadmin'; }

// Uploads a file as one PUT; onProgress(sentBytes, totalBytes) follows the
// bytes leaving the browser (fetch cannot report that, XMLHttpRequest can).
export function uploadResource(type, name, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `/api/v1/resources/${encodeURIComponent(type)}/${encodeURIComponent(name)}`);
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.setRequestHeader('X-CSRF-Token', api.csrfToken());
    for (const [key, value] of Object.entries(tenantHeaders())) xhr.setRequestHeader(key, value);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      let reply = null;
      try { reply = JSON.parse(xhr.responseText); } catch { /* not JSON: reported below */ }
      if (xhr.status >= 200 && xhr.status < 300 && reply) return resolve(reply);
      reject(reply?.error || { code: 'INTERNAL', message: `the upload failed with HTTP status ${xhr.status}`, details: {} });
    };
    xhr.onerror = () => reject({ code: 'UNAVAILABLE', message: 'the upload could not reach the server', details: {} });
    xhr.send(file);
  });
}
