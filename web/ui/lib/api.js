// The one way the UI talks to weft-web: POST /api/v1/<op> with the op's body as
// JSON, the session cookie sent by the browser and the CSRF token in a header.
// Failures become ApiError with weftd's code and sentence, so a screen can show
// the very message the CLI would print, beside the form or button that caused it.

const BASE = '/api/v1/';

let csrfToken = null;
let tenantOverride = storedForTab('weft.tenant');
const unauthorizedListeners = new Set();

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details ?? null;
  }
}

// A value kept for the tab (sessionStorage; null or '' removes it); with
// storage disabled, in memory only.
function keepForTab(key, value) {
  try {
    if (value) sessionStorage.setItem(key, value);
    else sessionStorage.removeItem(key);
  } catch { /* storage disabled: memory only */ }
}

function storedForTab(key) {
  try { return sessionStorage.getItem(key); } catch { return null; }
}

// The token is also kept for the tab, so a reload still has it should the
// session reply ever come without one.
export function setCsrfToken(token) {
  csrfToken = token || null;
  keepForTab('weft.csrf', csrfToken);
}

// A superadmin acts in another tenant by naming it on every request. The
// choice is kept for the tab (sessionStorage): a reload stays in that tenant
// (the address names no tenant); signing in or out forgets it.
export function setTenantOverride(tenant) {
  tenantOverride = tenant || null;
  keepForTab('weft.tenant', tenantOverride);
}
export function tenantOverrideValue() { return tenantOverride; }

// Called when the gateway says the session is gone (expired, logged out in
// another tab, weftd forgot it), so the app can go back to the sign-in screen.
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  if (tenantOverride) h['X-Weft-Tenant'] = tenantOverride;
  return h;
}

async function errorFrom(response) {
  let payload = null;
  try { payload = await response.json(); } catch { /* not JSON: a proxy's page */ }
  const e = payload && payload.error;
  if (e && e.message) return new ApiError(response.status, e.code || 'ERROR', e.message, e.details);
  const fallback = {
    401: ['UNAUTHENTICATED', 'You are not signed in.'],
    403: ['DENIED', 'You may not do this.'],
    404: ['NOT_FOUND', 'Not found.'],
    413: ['TOO_LARGE', 'The request is too large for the gateway.'],
    429: ['RATE_LIMITED', 'Too many requests; wait a moment and try again.'],
    502: ['UNAVAILABLE', 'The gateway cannot reach weftd.'],
    503: ['UNAVAILABLE', 'weftd is not available right now.'],
  }[response.status] || ['ERROR', `The gateway answered ${response.status} ${response.statusText}.`];
  return new ApiError(response.status, fallback[0], fallback[1], null);
}

async function send(method, path, { body, raw, quiet401 = false, onUploadProgress } = {}) {
  const extra = {};
  if (method !== 'GET' && csrfToken) extra['X-CSRF-Token'] = csrfToken;
  if (body !== undefined) extra['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(BASE + path, {
      method,
      headers: headers(extra),
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'UNAVAILABLE', 'The Weft gateway did not answer; is weft-web running?', null);
  }
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 401 && !quiet401) unauthorizedListeners.forEach((l) => l(error));
    // weftd answers DENIED to an op with a session it no longer knows (it ended,
    // or the user was deleted); the session route tells that from a real refusal.
    if (response.status === 403 && !quiet401) checkSessionStillThere(error);
    throw error;
  }
  if (response.status === 204) return {};
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

function checkSessionStillThere(error) {
  send('GET', 'session', { quiet401: true }).catch((e) => {
    if (e instanceof ApiError && e.status === 401) unauthorizedListeners.forEach((l) => l(error));
  });
}

// Runs one weftd op, e.g. call('cluster.get', {cluster: 'shop'}).
export function call(op, body = {}) { return send('POST', encodeURIComponent(op), { body }); }

export async function login(credentials) {
  const s = await send('POST', 'login', { body: credentials, quiet401: true });
  setCsrfToken(s.csrf_token);
  setTenantOverride(null);
  return s;
}

export async function logout() {
  try { await send('POST', 'logout', { body: {}, quiet401: true }); } finally {
    setCsrfToken(null);
    setTenantOverride(null);
  }
}

// The session the cookie names, or null when nobody is signed in.
export async function currentSession() {
  try {
    const s = await send('GET', 'session', { quiet401: true });
    setCsrfToken(s.csrf_token || storedForTab('weft.csrf'));
    return s;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return null;
    throw e;
  }
}

// Uploads a resource's bytes in one PUT; progress(loaded, total) is called as the
// browser sends them (fetch cannot report upload progress, XMLHttpRequest can).
export function uploadResource(type, name, file, progress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `${BASE}resources/${encodeURIComponent(type)}/${encodeURIComponent(name)}`);
    xhr.setRequestHeader('Accept', 'application/json');
    if (csrfToken) xhr.setRequestHeader('X-CSRF-Token', csrfToken);
    if (tenantOverride) xhr.setRequestHeader('X-Weft-Tenant', tenantOverride);
    xhr.upload.onprogress = (e) => { if (progress && e.lengthComputable) progress(e.loaded, e.total); };
    xhr.onerror = () => reject(new ApiError(0, 'UNAVAILABLE', 'The upload was cut off before the gateway answered.', null));
    xhr.onload = () => {
      let payload = null;
      try { payload = JSON.parse(xhr.responseText || '{}'); } catch { /* keep null */ }
      if (xhr.status >= 200 && xhr.status < 300) return resolve(payload || {});
      const e = payload && payload.error;
      reject(new ApiError(xhr.status, e?.code || 'ERROR', e?.message || `The gateway answered ${xhr.status}.`, e?.details));
    };
    xhr.send(file);
  });
}
