// What every browser test does: open a page on the gateway, sign in, take a
// screenshot, and call the HTTP API directly (as a script or an attacker would).
import { launchChromium, screenshotPath } from './browser.mjs';

export async function openBrowser() {
  const browser = await launchChromium();
  return browser;
}

// A fresh browser context (its own cookies) at 1280x800 unless told otherwise.
export async function newPage(browser, stack, { width = 1280, height = 800 } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, baseURL: stack.url, ignoreHTTPSErrors: true });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.setDefaultTimeout(30000);
  return page;
}

export async function signIn(page, { tenant, user, password }) {
  await page.goto('/');
  await page.fill('input[name=tenant]', tenant);
  await page.fill('input[name=user]', user);
  await page.fill('input[name=password]', password);
  await page.click('[data-testid=login-submit]');
  // Attached, not visible: on a narrow screen the nav (and whoami) is folded away.
  await page.waitForSelector('[data-testid=whoami]', { state: 'attached' });
}

export async function shot(page, name) {
  const file = screenshotPath(name);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

// POST /api/v1/<op> from outside the browser; returns {status, body, headers}.
export async function api(stack, op, body = {}, { cookie, csrf, token, method = 'POST', headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', ...headers };
  if (cookie) h.Cookie = cookie;
  if (csrf) h['X-CSRF-Token'] = csrf;
  if (token) h.Authorization = `Bearer ${token}`;
  const r = await fetch(`${stack.url}/api/v1/${op}`, { method, headers: h, body: method === 'GET' ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let parsed = null;
  try { parsed = JSON.parse(text); } catch { parsed = text; }
  return { status: r.status, body: parsed, headers: r.headers };
}

// Signs in over HTTP once per user and stack (weftd rate-limits sign-ins);
// returns {cookie, csrf, session}.
export async function apiLogin(stack, credentials) {
  stack.apiSessions = stack.apiSessions || new Map();
  const key = `${credentials.tenant}/${credentials.user}`;
  if (!stack.apiSessions.has(key)) stack.apiSessions.set(key, await freshApiLogin(stack, credentials));
  return stack.apiSessions.get(key);
}

export async function freshApiLogin(stack, credentials) {
  const r = await fetch(`${stack.url}/api/v1/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(credentials),
  });
  const body = await r.json();
  if (r.status !== 200) throw new Error(`login as ${credentials.user} answered ${r.status}: ${JSON.stringify(body)}`);
  const cookie = (r.headers.get('set-cookie') || '').split(';')[0];
  return { cookie, csrf: body.csrf_token, session: body };
}

// The browser's weft_session cookie, as a Cookie header.
export async function pageCookie(page) {
  const cookies = await page.context().cookies();
  const c = cookies.find((x) => x.name === 'weft_session');
  return c ? `${c.name}=${c.value}` : '';
}
