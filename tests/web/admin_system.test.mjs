// Browser tests of the superadmin's screens against the real weftd, weft-host
// and weft-web: tenants with their quotas and worker threads; an enrollment
// token made in the hosts screen enrolls a real second weft-host, which shows
// live with its plugins and is cut off when revoked there; the audit log lists
// what was done.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useStack } from './support/suite.mjs';
import { BUILD_DIR, waitFor } from './support/stack.mjs';
import { signIn, shot, api, apiLogin } from './support/ui.mjs';

const ROOT = { tenant: '_system', user: 'superadmin', password: 'root-password-1' };
const ctx = useStack({
  patch: (stack) => stack.weftOk(['user', 'passwd', 'superadmin', '--password-stdin'], { input: ROOT.password + '\n' }),
});

// A weft-host that enrolls with `token`, with the fake plugins (as the rig's own host).
function startHost(stack, id, token) {
  const dir = path.join(stack.dir, id);
  fs.mkdirSync(dir, { recursive: true });
  const plugins = ['providers', 'automators'].map((k) => JSON.stringify(path.join(BUILD_DIR, 'plugins', k)));
  const config = path.join(dir, 'host.toml');
  fs.writeFileSync(config, [
    `server = ${JSON.stringify(stack.endpoints.provisioner)}`, `host_id = ${JSON.stringify(id)}`,
    `state_dir = ${JSON.stringify(path.join(dir, 'state'))}`, 'capacity = 3', 'take_wait_ms = 500',
    `plugin_dirs = [${plugins.join(', ')}]`, `enroll_token = ${JSON.stringify(token)}`, '',
  ].join('\n'));
  return stack.spawn(`weft-host-${id}`, path.join(BUILD_DIR, 'bin', 'weft-host'), ['--config', config]);
}

const hostNamed = (stack, id) => (stack.weftJson(['host', 'list']).hosts || []).find((h) => h.id === id);

ctx.test('the superadmin makes a tenant, edits its quotas, sees its worker threads, and deletes it', async (page, stack) => {
  await signIn(page, ROOT);
  await page.goto('/#/admin/tenants');
  await page.fill('input[name=tenant-name]', 'initech');
  await page.fill('input[name=new-max_clusters]', '2');
  await page.click('text=Create tenant');
  const row = page.locator('[data-tenant=initech]');
  await row.waitFor();
  let tenant = stack.weftJson(['tenant', 'list']).tenants.find((t) => t.name === 'initech');
  assert.equal(tenant.max_clusters, 2);
  assert.equal(tenant.max_nodes, 0);

  await row.getByText('Edit quotas').click();
  await row.locator('input[name=initech-max_nodes]').fill('12');
  await row.getByText('Save').click();
  await row.getByText('Edit quotas').waitFor();
  tenant = stack.weftJson(['tenant', 'list']).tenants.find((t) => t.name === 'initech');
  assert.equal(tenant.max_nodes, 12);
  assert.equal(tenant.max_clusters, 2);

  // The worker threads column sums what the live hosts give each tenant now.
  const split = {};
  for (const h of stack.weftJson(['host', 'list']).hosts.filter((x) => x.live)) {
    for (const w of h.workers) split[w.tenant] = (split[w.tenant] || 0) + w.threads;
  }
  const shown = await page.$$eval('tr[data-tenant]', (rows) => Object.fromEntries(rows.map((r) => [r.dataset.tenant, r.children[4].textContent.trim()])));
  for (const name of ['acme', 'globex', 'initech']) assert.equal(shown[name], String(split[name] || 0), `threads of ${name}`);
  await shot(page, 'admin-tenants');

  await row.getByText('Delete').click();
  await page.click('[data-testid=confirm]');
  await row.waitFor({ state: 'detached' });
  assert.ok(!stack.weftJson(['tenant', 'list']).tenants.some((t) => t.name === 'initech'));

  await page.goto('/#/admin/audit');
  await page.locator('table.audit td', { hasText: 'tenant.update' }).first().waitFor();
  const ops = await page.$$eval('table.audit tr[data-audit] td:nth-child(3)', (cells) => cells.map((c) => c.textContent.trim()));
  for (const op of ['tenant.create', 'tenant.update', 'tenant.delete']) assert.ok(ops.includes(op), `the audit log shows ${op}: ${ops}`);
  const who = await page.locator('table.audit tr[data-audit]', { hasText: 'tenant.delete' }).locator('td:nth-child(2)').innerText();
  assert.match(who, /superadmin.*via gateway web/, 'the entry names who, and the gateway the browser went through');
});

ctx.test('the superadmin sees which tenant its screens show: tenant default until it picks another', async (page, stack) => {
  const { cookie, csrf } = await apiLogin(stack, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  const made = await api(stack, 'cluster.create', { name: 'acme-seen-by-root', template: 'web-fake', size: 3 }, { cookie, csrf });
  assert.equal(made.status, 200, `cluster.create as alice: ${JSON.stringify(made.body)}`);

  await signIn(page, ROOT);
  await page.goto('/#/clusters');
  const switcher = page.locator('[data-testid=tenant-switcher]');
  await switcher.waitFor();
  // With no tenant picked weftd answers for tenant default: the selector and the page name it, not _system.
  await waitFor(async () => (await switcher.inputValue()) === 'default', 'the tenant selector to show default');
  const subtitle = page.locator('.page .subtitle');
  await page.locator('.page .subtitle', { hasText: 'Every cluster of tenant default' }).waitFor();
  assert.doesNotMatch(await subtitle.innerText(), /_system/);
  // Tenant default has no cluster; acme's is not among them.
  await page.locator('.page .empty, .page [data-testid=clusters]').first().waitFor();
  const listed = async () => page.$$eval('[data-testid=cluster-link]', (links) => links.map((a) => a.textContent));
  const ofDefault = (stack.weftJson(['cluster', 'list'], { tenant: 'default' }).clusters || []).map((c) => c.name);
  assert.deepEqual((await listed()).sort(), ofDefault.sort());
  assert.ok(!(await listed()).includes('acme-seen-by-root'));
  await shot(page, 'superadmin-clusters-default');

  // Picking acme shows acme's clusters, and says so.
  await switcher.selectOption('acme');
  await page.locator('.page .subtitle', { hasText: 'Every cluster of tenant acme' }).waitFor();
  await page.locator('[data-testid=cluster-link]', { hasText: 'acme-seen-by-root' }).waitFor();
  assert.equal(await switcher.inputValue(), 'acme');
  // The choice outlives a reload, though the address names no tenant.
  await page.click('[data-testid=cluster-link]:has-text("acme-seen-by-root")');
  await page.waitForSelector('[data-testid=cluster-name]');
  await page.reload();
  await page.waitForSelector('[data-testid=cluster-name]:has-text("acme-seen-by-root")');
  await switcher.waitFor();
  await waitFor(async () => (await switcher.inputValue()) === 'acme', 'the tenant selector to show acme after a reload');
  await page.goto('/#/clusters');
  await page.locator('.page .subtitle', { hasText: 'Every cluster of tenant acme' }).waitFor();
  // And back: tenant default again, with nothing picked.
  await switcher.selectOption('default');
  await page.locator('.page .subtitle', { hasText: 'Every cluster of tenant default' }).waitFor();
});

ctx.test('an enrollment token from the hosts screen enrolls a host, shown live with its plugins, and revoke cuts it off', async (page, stack) => {
  await signIn(page, ROOT);
  await page.goto('/#/admin/hosts');
  await page.locator('[data-host=h1]').getByText('live').waitFor();
  await page.fill('input[name=enroll-host]', 'h2');
  await page.click('text=Make token');
  const token = (await page.locator('[data-enroll-token]').innerText()).trim();
  assert.match(token, /^weft1\./);

  const h2 = startHost(stack, 'h2', token);
  await waitFor(() => {
    if (!h2.running()) throw new Error(`weft-host h2 exited:\n${stack.logs()}`);
    return hostNamed(stack, 'h2')?.live;
  }, 'host h2 to enroll and register');
  await page.click('text=Refresh');
  const row = page.locator('[data-host=h2]');
  await row.getByText('live').waitFor();
  assert.match(await row.innerText(), /fake-automator/);
  assert.match(await row.innerText(), /\b3\b/, 'its capacity');
  await shot(page, 'admin-hosts');

  await row.getByText('Revoke').click();
  await page.click('[data-testid=confirm]');
  // Revoked: h2 has no key in force, and weftd refuses its next request.
  await waitFor(() => /weftd refuses this host/.test(fs.readFileSync(h2.log, 'utf8')), 'weftd to refuse host h2');
  const again = stack.weft(['host', 'revoke', 'h2']);
  assert.notEqual(again.code, 0, 'h2 has no key in force any more');
  assert.match(again.err, /h2/);
  await h2.stop();

  await page.goto('/#/admin/plugins');
  const field = page.locator('[data-plugin=fake-provider] [data-field=api_token]');
  await field.waitFor();
  assert.match(await field.innerText(), /yes \(sealed\)/);
});
