// What a user sees through the web UI is what weftd lets that user see: not
// another tenant's clusters, not the admin screens; the API refuses the same.
import assert from 'node:assert/strict';
import { useStack } from './support/suite.mjs';
import { signIn, shot, api, apiLogin } from './support/ui.mjs';

const s = useStack();
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };
const BOB = { tenant: 'globex', user: 'bob', password: 'bob-password-1' };
const ADA = { tenant: 'acme', user: 'ada', password: 'ada-password-1' };

async function createCluster(stack, who, name) {
  const { cookie, csrf } = await apiLogin(stack, who);
  const r = await api(stack, 'cluster.create', { name, template: 'web-fake', size: 3 }, { cookie, csrf });
  assert.equal(r.status, 200, `cluster.create as ${who.user}: ${JSON.stringify(r.body)}`);
  return r.body.cluster;
}

s.test('a user sees their own clusters and not those of another tenant', async (page, stack) => {
  const mine = await createCluster(stack, ALICE, 'alice-web');
  const theirs = await createCluster(stack, BOB, 'bob-web');
  await signIn(page, ALICE);
  await page.goto('/#/clusters');
  await page.waitForSelector('text=alice-web');
  const names = await page.$$eval('[data-testid=cluster-link]', (links) => links.map((a) => a.textContent));
  assert.deepEqual(names, ['alice-web']);
  await shot(page, 'clusters-of-alice');

  // Even by its id in the address bar, bob's cluster is not there for alice.
  await page.goto(`/#/clusters/${theirs.id}`);
  const error = await page.waitForSelector('.error-note');
  assert.match(await error.textContent(), /NOT_FOUND|DENIED/);
  assert.equal(await page.$('[data-testid=cluster-name]'), null);
  await shot(page, 'cluster-of-another-tenant');

  const { cookie, csrf } = await apiLogin(stack, ALICE);
  const r = await api(stack, 'cluster.get', { cluster: theirs.id }, { cookie, csrf });
  assert.ok(r.status === 404 || r.status === 403, `cluster.get of bob's cluster answered ${r.status}`);
  const list = await api(stack, 'cluster.list', { all: true }, { cookie, csrf });
  assert.equal(list.status, 200);
  assert.deepEqual(list.body.clusters.map((c) => c.id), [mine.id]);
});

s.test('a user gets no admin screens, and the API refuses admin ops', async (page, stack) => {
  await signIn(page, ALICE);
  await page.waitForSelector('[data-testid=stat-clusters]');
  assert.equal(await page.$('[data-testid=admin-nav]'), null, 'no Administration section in the nav');
  const paths = await page.evaluate(async () => (await import('/admin/routes.js')).adminRoutes
    .filter((r) => !r.path.includes(':')).map((r) => r.path));
  for (const path of paths) {
    await page.goto(`/#${path}`);
    await page.waitForSelector('[data-testid=forbidden]');
  }
  if (paths.length) await shot(page, 'admin-screen-refused');

  const { cookie, csrf } = await apiLogin(stack, ALICE);
  for (const [op, body] of [['user.list', {}], ['user.create', { name: 'mallory', role: 'admin' }],
    ['provider.put', { name: 'evil', providertype: 'fake-provider', provisioner: {} }], ['host.token.create', {}]]) {
    const r = await api(stack, op, body, { cookie, csrf });
    assert.equal(r.status, 403, `${op} as a user answered ${r.status}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'DENIED');
  }
});

s.test('a tenant admin sees the admin section when admin screens exist', async (page) => {
  await signIn(page, ADA);
  await page.waitForSelector('[data-testid=stat-clusters]');
  const navEntries = await page.evaluate(async () => (await import('/admin/routes.js')).adminRoutes
    .filter((r) => r.nav !== false && (r.roles || ['admin', 'superadmin']).includes('admin')).length);
  assert.equal(Boolean(await page.$('[data-testid=admin-nav]')), navEntries > 0);
  await page.goto('/#/clusters');
  await page.waitForSelector('text=alice-web');
  assert.ok(await page.$('th:has-text("Owner")'), 'an admin sees who owns each cluster');
  await shot(page, 'clusters-of-admin');
});
