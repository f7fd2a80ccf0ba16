// Requests that do not come from the signed-in UI are refused: without the
// CSRF token, with a wrong one, from another site's form, with a made-up
// session cookie, or with a body that names a key twice. None of them changes
// anything.
import assert from 'node:assert/strict';
import http from 'node:http';
import { useStack } from './support/suite.mjs';
import { signIn, shot, api, apiLogin, pageCookie } from './support/ui.mjs';

const s = useStack();
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };
const CREATE = { name: 'csrf', template: 'web-fake', size: 3 };

async function clusterNames(stack) {
  const { cookie, csrf } = await apiLogin(stack, ALICE);
  const r = await api(stack, 'cluster.list', { all: true }, { cookie, csrf });
  assert.equal(r.status, 200);
  return r.body.clusters.map((c) => c.name);
}

s.test('a state-changing request without the CSRF token, or with a wrong one, is refused', async (page, stack) => {
  const { cookie, csrf } = await apiLogin(stack, ALICE);
  const none = await api(stack, 'cluster.create', CREATE, { cookie });
  assert.equal(none.status, 403, JSON.stringify(none.body));
  assert.equal(none.body.error.code, 'DENIED');
  const wrong = await api(stack, 'cluster.create', CREATE, { cookie, csrf: csrf.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')) });
  assert.equal(wrong.status, 403, JSON.stringify(wrong.body));
  // A read (GET) needs no token.
  assert.equal((await api(stack, 'cluster.list', {}, { cookie, method: 'GET' })).status, 200);
  assert.deepEqual(await clusterNames(stack), []);
});

s.test('the signed-in browser itself cannot change anything without the token', async (page, stack) => {
  await signIn(page, ALICE);
  const status = await page.evaluate(async (body) => {
    const r = await fetch('/api/v1/cluster.create', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    return r.status;
  }, CREATE);
  assert.equal(status, 403);
  assert.deepEqual(await clusterNames(stack), []);
});

s.test('a form on another site posting with the user\'s cookie is refused', async (page, stack) => {
  await signIn(page, ALICE);
  assert.ok(await pageCookie(page));
  // Another origin (another port is another origin, though the same site).
  const attacker = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<form id="f" method="POST" action="${stack.url}/api/v1/cluster.create" enctype="text/plain">
      <input name='{"name":"csrf","template":"web-fake","size":3,"x":"' value='"}'></form>
      <script>document.getElementById('f').submit()</script>`);
  });
  await new Promise((ok) => attacker.listen(0, '127.0.0.1', ok));
  try {
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/api/v1/cluster.create')),
      page.goto(`http://127.0.0.1:${attacker.address().port}/`),
    ]);
    assert.ok([401, 403].includes(response.status()), `the forged form got ${response.status()}`);
  } finally {
    attacker.close();
  }
  assert.deepEqual(await clusterNames(stack), []);
});

s.test('a made-up session cookie is not a session', async (page, stack) => {
  const forged = 'weft_session=' + 'f'.repeat(64);
  const r = await api(stack, 'cluster.list', {}, { cookie: forged });
  assert.ok(r.status === 401 || r.status === 403, `cluster.list with a forged session: ${r.status} ${JSON.stringify(r.body)}`);
  const me = await api(stack, 'session', {}, { cookie: forged, method: 'GET' });
  assert.equal(me.status, 401);
  const url = new URL(stack.url);
  await page.context().addCookies([{ name: 'weft_session', value: 'f'.repeat(64), domain: url.hostname, path: '/' }]);
  await page.goto('/#/clusters');
  await page.waitForSelector('[data-testid=login-form]');
  await shot(page, 'forged-session');
});

s.test('a body that names a key twice is refused, from a script and from the signed-in browser', async (page, stack) => {
  const once = ' appears twice; name each field once (JSON parsers differ on which of the two they take)';
  // JSON.stringify never repeats a key: these bodies are written out by hand.
  const { cookie, csrf } = await apiLogin(stack, ALICE);
  const scripted = await fetch(`${stack.url}/api/v1/cluster.create`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Cookie: cookie, 'X-CSRF-Token': csrf },
    body: '{"name":"csrf","template":"web-fake","size":3,"name":"other"}',
  });
  assert.deepEqual({ status: scripted.status, body: await scripted.json() },
    { status: 400, body: { error: { code: 'INVALID', message: `body field "name"${once}`, details: {} } } });

  await signIn(page, ALICE);
  const inPage = await page.evaluate(async () => {
    const r = await fetch('/api/v1/cluster.create', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': sessionStorage.getItem('weft.csrf') },
      body: '{"name":"csrf","template":"web-fake","size":3,"config":{"web":{"port":80,"port":8080}}}',
    });
    return { status: r.status, body: await r.json() };
  });
  assert.deepEqual(inPage,
    { status: 400, body: { error: { code: 'INVALID', message: `body field "config.web.port"${once}`, details: {} } } });
  assert.deepEqual(await clusterNames(stack), []);
});
