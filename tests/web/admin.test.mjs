// Browser tests of the admin screens (web/ui/admin/) against the real weftd,
// weft-host and weft-web: an admin edits a template and the next plan preview
// obeys the new constraint; a user cannot reach the admin screens and the API
// refuses their admin ops; a resource upload shows its progress as the bytes
// leave the browser, and the version is then staged, synced, recalled and
// deleted.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { useStack } from './support/suite.mjs';
import { newPage, signIn, shot, api, apiLogin } from './support/ui.mjs';

const ctx = useStack();

// The services of each node group the plan preview shows, e.g.
// [['fake-base', 'fake-haproxy', 'fake-redis'], ['fake-base', 'fake-nginx']].
async function planGroups(page) {
  await page.waitForSelector('[data-testid=plan-summary]');
  return page.$$eval('[data-testid=plan-summary] .plan-group', (groups) =>
    groups.map((g) => [...g.querySelectorAll('.chip')].map((c) => c.textContent.trim()).sort()));
}

async function previewPlan(page) {
  await page.goto('/#/create?template=web-fake');
  await page.fill('input[name=name]', 'shop');
  await page.fill('input[name=size]', '5');
  await page.click('[data-testid=preview]');
  return planGroups(page);
}

const together = (groups, a, b) => groups.some((g) => g.includes(a) && g.includes(b));

ctx.test('an admin adds a cantcoexist group to a template and the next plan preview obeys it', async (page, stack) => {
  await signIn(page, { tenant: 'acme', user: 'ada', password: 'ada-password-1' });

  const before = await previewPlan(page);
  assert.ok(together(before, 'fake-haproxy', 'fake-redis'),
    `before the edit the solver puts haproxy and redis on one node: ${JSON.stringify(before)}`);

  await page.goto('/#/admin/templates');
  await page.click('[data-entity=web-fake]');
  await page.click('[data-add-group=cantcoexist]');
  const group = page.locator('[data-groups=cantcoexist] [data-group="1"]');
  await group.locator('input[value=fake-haproxy]').check();
  await group.locator('input[value=fake-redis]').check();
  await page.click('.entity-editor button.primary');
  await page.getByText("Saved clustertemplate 'web-fake' as version 2.").waitFor();
  await shot(page, 'admin-template-edited');

  const stored = stack.weftJson(['clustertemplate', 'get', 'web-fake'], { tenant: 'acme' });
  assert.deepEqual(stored.entity.constraints.layout.cantcoexist,
    [['fake-haproxy', 'fake-nginx'], ['fake-haproxy', 'fake-redis']]);
  // The form kept what it does not show: the template's other fields are as imported.
  assert.equal(stored.entity.administration.leaseduration.max, '7d');
  assert.deepEqual(stored.entity.constraints.services['fake-redis'].hardwaretypes, ['medium']);

  const after = await previewPlan(page);
  await shot(page, 'admin-template-plan-after-edit');
  assert.ok(!together(after, 'fake-haproxy', 'fake-redis'),
    `after the edit no node runs both haproxy and redis: ${JSON.stringify(after)}`);
  assert.ok(after.some((g) => g.includes('fake-haproxy')), `haproxy still has a node: ${JSON.stringify(after)}`);
});

ctx.test('a user sees no admin screen, cannot open one, and the API refuses their admin ops', async (page, stack) => {
  await signIn(page, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  assert.equal(await page.locator('[data-testid=admin-nav]').count(), 0, 'a user has no Administration section in the nav');
  for (const screen of ['/admin/templates', '/admin/resources', '/admin/users', '/admin/tenants']) {
    await page.goto(`/#${screen}`);
    await page.waitForSelector('[data-testid=forbidden]');
  }
  await shot(page, 'admin-refused-to-user');

  const alice = await apiLogin(stack, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  const template = stack.weftJson(['clustertemplate', 'get', 'web-fake'], { tenant: 'acme' });
  const refused = [
    ['clustertemplate.put', { ...template.entity, description: 'changed by a user' }],
    ['clustertemplate.delete', { name: 'web-fake' }],
    ['user.create', { name: 'mallory', role: 'admin' }],
    ['resource.sync', {}],
    ['tenant.list', {}],
  ];
  for (const [op, body] of refused) {
    const r = await api(stack, op, body, alice);
    assert.equal(r.status, 403, `${op} by a user: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'DENIED', `${op} by a user`);
  }
  const unchanged = stack.weftJson(['clustertemplate', 'get', 'web-fake'], { tenant: 'acme' });
  assert.equal(unchanged.version, template.version);

  // A tenant admin has the admin screens but not the superadmin's.
  const adminPage = await newPage(ctx.browser, stack);
  await signIn(adminPage, { tenant: 'acme', user: 'ada', password: 'ada-password-1' });
  await adminPage.waitForSelector('[data-testid=admin-nav]');
  assert.equal(await adminPage.locator('[data-testid=admin-nav] a[href="#/admin/tenants"]').count(), 0);
  await adminPage.goto('/#/admin/tenants');
  await adminPage.waitForSelector('[data-testid=forbidden]');
  const ada = await apiLogin(stack, { tenant: 'acme', user: 'ada', password: 'ada-password-1' });
  const tenants = await api(stack, 'tenant.list', {}, ada);
  assert.equal(tenants.status, 403, JSON.stringify(tenants.body));
  assert.deepEqual(adminPage.errors, []);
  await adminPage.context().close();
});

// A TCP proxy in front of the gateway that passes what the browser sends at
// about `bytesPerTick` per tick (and answers at full speed): a slow uplink, so
// that an upload takes long enough for the browser to report its progress.
function slowUplink(port, { bytesPerTick = 64 * 1024, tickMs = 20 } = {}) {
  return new Promise((resolve) => {
    const server = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      upstream.pipe(client);
      const queue = [];
      let timer = null;
      const pump = () => {
        let budget = bytesPerTick;
        while (budget > 0 && queue.length) {
          const chunk = queue[0];
          if (chunk.length <= budget) {
            upstream.write(queue.shift());
            budget -= chunk.length;
          } else {
            upstream.write(chunk.subarray(0, budget));
            queue[0] = chunk.subarray(budget);
            budget = 0;
          }
        }
        if (queue.length === 0) {
          clearInterval(timer);
          timer = null;
          client.resume();
        }
      };
      client.on('data', (chunk) => {
        queue.push(chunk);
        client.pause();
        if (!timer) timer = setInterval(pump, tickMs);
      });
      client.on('end', () => upstream.end());
      const close = () => { clearInterval(timer); client.destroy(); upstream.destroy(); };
      client.on('error', close);
      upstream.on('error', close);
      upstream.on('close', close);
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

ctx.test('a resource upload shows its progress, then the version is staged, synced, recalled and deleted', async (page, stack) => {
  const proxy = await slowUplink(Number(new URL(stack.url).port));
  try {
    // Everything the browser sends goes through the slow uplink.
    const slow = `http://127.0.0.1:${proxy.address().port}`;
    await page.goto(`${slow}/`);
    await page.fill('input[name=tenant]', 'acme');
    await page.fill('input[name=user]', 'ada');
    await page.fill('input[name=password]', 'ada-password-1');
    await page.click('[data-testid=login-submit]');
    await page.waitForSelector('[data-testid=whoami]');
    await page.goto(`${slow}/#/admin/resources`);
    await page.waitForSelector('.upload-form');

    const bytes = crypto.randomBytes(8 * 1024 * 1024);
    const digest = 'sha256:' + crypto.createHash('sha256').update(bytes).digest('hex');
    await page.fill('input[name=resource-type]', 'fake-automator');
    await page.setInputFiles('input[name=resource-file]', { name: 'payload.bin', mimeType: 'application/octet-stream', buffer: bytes });
    assert.equal(await page.inputValue('input[name=resource-name]'), 'payload.bin', 'the name defaults to the file name');

    // Every value the progress bar shows, as the page changes it.
    await page.evaluate(() => {
      window.seenProgress = [];
      const record = () => {
        const bar = document.querySelector('[data-testid=upload-progress] [role=progressbar]');
        if (bar) window.seenProgress.push(Number(bar.getAttribute('aria-valuenow')));
      };
      new MutationObserver(record).observe(document.body,
        { subtree: true, childList: true, attributes: true, attributeFilter: ['aria-valuenow'] });
    });
    await page.click('.upload-form button[type=submit]');
    const notice = page.locator('.upload-form [role=status]');
    await notice.waitFor();
    const seen = await page.evaluate(() => window.seenProgress);
    await shot(page, 'admin-resource-uploaded');

    assert.match(await notice.textContent(), /Uploaded fake-automator\/payload\.bin as version 1 \(8\.0 MiB/);
    assert.ok((await notice.textContent()).includes(digest), 'the notice shows the digest weftd computed, equal to the file\'s');
    assert.ok(seen.some((p) => p > 0 && p < 100), `the bar moved through values between 0 and 100: ${JSON.stringify(seen)}`);
    assert.equal(seen[seen.length - 1], 100, `the bar ends full: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1], `the bar never goes back: ${JSON.stringify(seen)}`);

    const card = page.locator('[data-resource="fake-automator/payload.bin"]');
    await card.locator('[data-version="1"] button', { hasText: 'Stage' }).click();
    await card.locator('[data-version="1"] [data-status=staged]').waitFor();
    await page.getByRole('button', { name: 'Sync (1 staged)' }).click();
    await card.locator('[data-version="1"] [data-status=active]').waitFor();
    await shot(page, 'admin-resource-synced');

    const listed = stack.weftJson(['resource', 'list'], { tenant: 'acme' }).resources;
    const resource = listed.find((r) => r.type === 'fake-automator' && r.name === 'payload.bin');
    assert.equal(resource.active, 1);
    assert.equal(resource.versions[0].digest, digest);
    assert.equal(resource.versions[0].size, bytes.length);

    // Recalled, no version is active; then the resource is deleted.
    await card.locator('[data-version="1"] button', { hasText: 'Recall' }).click();
    await page.click('[data-testid=confirm]');
    await card.locator('[data-version="1"] [data-status=retired]').waitFor();
    const recalled = stack.weftJson(['resource', 'list'], { tenant: 'acme' }).resources.find((r) => r.name === 'payload.bin');
    assert.equal(recalled.active, null);
    await card.locator('button', { hasText: 'Delete resource' }).click();
    await page.click('[data-testid=confirm]');
    await card.waitFor({ state: 'detached' });
    assert.ok(!stack.weftJson(['resource', 'list'], { tenant: 'acme' }).resources.some((r) => r.name === 'payload.bin'));
  } finally {
    proxy.close();
  }
});
