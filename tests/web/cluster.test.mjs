// A cluster's life through the web UI: template, plan preview, create, the
// progress bar moved by server-sent events until 100 % (the page is never
// reloaded), a scale, and a delete that asks first.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useStack } from './support/suite.mjs';
import { signIn, shot } from './support/ui.mjs';

const SERVICES = ['fake-base', 'fake-haproxy', 'fake-nginx', 'fake-redis', 'fake-monitoring'];
const ACTIONS = ['install', 'configure', 'start', 'stop', 'remove'];

// Every service action takes a little while, so the job has a middle to watch.
const s = useStack({
  patch: (stack) => {
    for (const service of SERVICES) {
      for (const action of ACTIONS) {
        try { stack.patchService(service, action, { latency_ms: 250 }); } catch { /* the service lacks that action */ }
      }
    }
  },
});
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };

// Records every value the progress bar shows, from inside the page.
async function watchProgress(page) {
  await page.evaluate(() => {
    window.__weftProgress = [];
    window.__weftNotReloaded = true;
    const seen = () => {
      const bar = document.querySelector('[data-testid=job-progress] [role=progressbar]');
      if (bar) window.__weftProgress.push(Number(bar.getAttribute('aria-valuenow')));
    };
    new MutationObserver(seen).observe(document.body, { subtree: true, childList: true, attributes: true });
    seen();
  });
}

async function waitJob(page, status) {
  await page.waitForSelector(`[data-testid=job-progress][data-status=${status}]`, { timeout: 120000 });
}

s.test('create a cluster from a template, with the plan first, and watch it finish live', async (page) => {
  const streams = [];
  page.on('request', (r) => { if (r.url().includes('/api/v1/events')) streams.push(r.url()); });
  await signIn(page, ALICE);
  await page.click('a[href="#/templates"]');
  // A lease of 0 is no lease, not "lease 0, at most 0".
  const single = page.locator('.template-card', { has: page.locator('[data-testid=use-single]') });
  assert.match(await single.textContent(), /leaseno lease/);
  await page.click('[data-testid=use-web-fake]');
  await page.waitForSelector('[data-testid=create-form]');
  await page.fill('input[name=name]', 'shop');
  await page.fill('input[name=size]', '4');
  await page.click('[data-testid=preview]');
  const plan = await page.waitForSelector('[data-testid=plan-summary]');
  assert.match(await plan.textContent(), /4 nodes/);
  await shot(page, 'create-plan-preview');

  await page.click('[data-testid=create]');
  await page.waitForSelector('[data-testid=cluster-name]');
  assert.equal(await page.textContent('[data-testid=cluster-name]'), 'shop');
  await watchProgress(page);
  await page.waitForFunction(() => window.__weftProgress.some((v) => v > 0 && v < 100), null, { timeout: 120000 });
  await shot(page, 'cluster-creating');
  await waitJob(page, 'succeeded');
  await page.waitForSelector('[data-testid=job-progress] [role=progressbar][aria-valuenow="100"]');
  assert.equal(await page.evaluate(() => window.__weftNotReloaded), true, 'the page was not reloaded');
  assert.ok(streams.some((u) => /cluster=/.test(u)), `the cluster screen followed the events stream (${streams})`);
  const seen = await page.evaluate(() => window.__weftProgress);
  assert.ok(seen.some((v) => v > 0 && v < 100), `the bar moved through the middle: ${seen}`);
  // The nodes got the fake provider's addresses, and every service that has a
  // START runs (fake-base has none: it stays configured).
  await page.waitForSelector('[data-testid=nodes] td:has-text("10.")');
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('[data-testid=services] tbody tr')];
    const state = (r) => [...r.querySelectorAll('[data-status]')].map((b) => b.dataset.status).join();
    return rows.length === 4 && rows.every((r) => state(r) === (r.textContent.startsWith('fake-base') ? 'configured' : 'running'));
  });
  await shot(page, 'cluster-created');
});

s.test('a second cluster of the same name is refused, with weftd\'s sentence beside the button', async (page) => {
  await signIn(page, ALICE);
  await page.goto('/#/create?template=web-fake');
  await page.fill('input[name=name]', 'shop');
  await page.click('[data-testid=preview]');
  await page.waitForSelector('[data-testid=plan-summary]');
  await page.click('[data-testid=create]');
  const note = await page.waitForSelector('text=Not created:');
  const text = await note.evaluate((n) => n.closest('.error-note').textContent);
  assert.match(text, /CONFLICT/);
  assert.match(text, /shop/);
  await shot(page, 'create-conflict');
});

s.test('scale the cluster with a preview of what changes', async (page) => {
  await signIn(page, ALICE);
  await page.goto('/#/clusters');
  await page.click('[data-testid=cluster-link]:has-text("shop")');
  await page.waitForSelector('[data-testid=cluster-name]');
  await page.click('[data-testid=action-scale]');
  await page.fill('[data-testid=scale-size]', '5');
  await page.click('.modal button:has-text("Preview")');
  await page.waitForSelector('.modal [data-testid=plan-summary]');
  // The preview says what changes, besides the layout afterwards: one node more, and what it gets.
  assert.match(await page.textContent('.modal [data-testid=plan-created]'), /^Adds 1 node: /);
  const added = (await page.textContent('.modal [data-testid=plan-created] .mono')).trim();
  assert.equal(await page.$('.modal [data-testid=plan-deleted]'), null, 'a scale up deletes nothing');
  assert.match(await page.textContent('.modal [data-testid=plan-services]'), /fake-base.*installed on 1 node/);
  await shot(page, 'scale-preview');
  await page.click('[data-testid=run-change]');
  await page.waitForSelector('[data-testid=job-progress][data-status=running], [data-testid=job-progress][data-status=succeeded]');
  await page.waitForFunction(() => document.querySelector('[data-testid=job-progress]')?.textContent.includes('scale'));
  await waitJob(page, 'succeeded');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=nodes] tbody tr').length === 5);

  // A rollback's preview names the node it would delete: the one the scale added.
  await page.click('[data-testid=action-rollback]');
  await page.click('.modal button:has-text("Preview")');
  assert.equal((await page.textContent('.modal [data-testid=plan-deleted]')).trim(), `Deletes 1 node: ${added}`);
  await shot(page, 'rollback-preview');
  await page.click('[role=dialog] [aria-label=Close]');

  // A reconfigure's preview shows the config it applies and what it makes of the
  // cluster's; once it ran, the cluster's screen shows its config.
  assert.match(await page.textContent('[data-testid=cluster-config]'), /"port": "8080"/);
  await page.click('[data-testid=action-reconfigure]');
  await page.fill('.modal textarea', '{"fake-nginx": {"listen_port": "8081"}}');
  await page.click('.modal button:has-text("Preview")');
  const config = await page.textContent('.modal [data-testid=plan-config]');
  assert.match(config, /Config applied/);
  assert.match(config, /"listen_port": "8081"/);
  assert.match(await page.textContent('.modal [data-testid=plan-config] > div:last-child'), /"port": "8080"[\s\S]*"listen_port": "8081"/,
    'afterwards: the patch merged into the cluster\'s config');
  assert.match(await page.textContent('.modal [data-testid=plan-services]'), /configured on 5 nodes/);
  await shot(page, 'reconfigure-preview');
  await page.click('[data-testid=run-change]');
  await page.waitForFunction(() => document.querySelector('[data-testid=job-progress]')?.textContent.includes('reconfigure'));
  await waitJob(page, 'succeeded');
  await page.waitForSelector('[data-testid=cluster-config]:has-text("8081")');
  assert.match(await page.textContent('[data-testid=cluster-config]'), /"port": "8080"/);
});

s.test('delete asks for the cluster\'s name first, then the cluster ends terminated', async (page) => {
  await signIn(page, ALICE);
  await page.goto('/#/clusters');
  await page.click('[data-testid=cluster-link]:has-text("shop")');
  await page.waitForSelector('[data-testid=cluster-name]');
  await page.click('[data-testid=delete-cluster]');
  assert.equal(await page.isDisabled('[data-testid=confirm]'), true, 'not before the name is typed');
  await page.fill('[data-testid=confirm-input]', 'sho');
  assert.equal(await page.isDisabled('[data-testid=confirm]'), true);
  await shot(page, 'delete-confirmation');
  await page.fill('[data-testid=confirm-input]', 'shop');
  await page.click('[data-testid=confirm]');
  await page.waitForSelector('h1 [data-status=terminated]', { timeout: 120000 });
  await waitJob(page, 'succeeded');
  assert.equal(await page.$('[data-testid=delete-cluster]'), null, 'a terminated cluster offers no delete');
  await shot(page, 'cluster-deleted');
  await page.goto('/#/clusters');
  await page.waitForSelector('text=No live cluster');
});

s.test('a node whose DELETE failed is marked in the cluster\'s node list', async (page, stack) => {
  // In tenant initech, the fake provider's DELETE always fails ([jobs] max_attempts = 2).
  stack.makeTenant('initech');
  stack.makeUser('initech', 'ivy', 'user', 'ivy-password-1');
  const file = `${stack.dir}/fake-delete-fails.json`;
  const provider = JSON.parse(fs.readFileSync(`${stack.catalogDir()}/providers/fake.json`, 'utf8'));
  provider.provisioner.fail_actions = 'DELETE';
  fs.writeFileSync(file, JSON.stringify(provider));
  stack.weftOk(['provider', 'put', file], { tenant: 'initech' });
  const ivy = stack.credentialOf('initech', 'ivy');
  stack.weftOk(['cluster', 'create', 'doomed', '--template', 'web-fake', '--size', '3', '--wait'], { as: ivy });
  const { cluster: made } = stack.weftJson(['cluster', 'get', 'doomed'], { as: ivy });
  const deleted = stack.weft(['cluster', 'delete', 'doomed', '--wait'], { as: ivy });
  assert.notEqual(deleted.code, 0, `the delete fails: ${deleted.out}${deleted.err}`);
  const { cluster } = stack.weftJson(['cluster', 'get', 'doomed'], { as: ivy });
  const marked = cluster.nodes.filter((n) => n.state === 'delete failed').map((n) => n.hostname).sort();
  assert.deepEqual(marked, made.nodes.map((n) => n.hostname).sort());

  await signIn(page, { tenant: 'initech', user: 'ivy', password: 'ivy-password-1' });
  await page.goto(`/#/clusters/${cluster.id}`);
  await page.waitForSelector('[data-testid=nodes] tbody tr');
  const rows = await page.$$eval('[data-testid=nodes] tbody tr', (trs) => trs.map((tr) => tr.textContent));
  assert.equal(rows.length, marked.length);
  for (const row of rows) assert.match(row, /delete failed/);
  await page.waitForSelector('[data-testid=nodes] [data-testid=node-state] .badge[data-status="delete failed"]');
  // Said where an operator looks first, with what to do; the changes weftd would refuse are not offered.
  const note = await page.textContent('[data-testid=delete-failed-note]');
  assert.match(note, new RegExp(`${marked.length} nodes were not deleted`));
  for (const host of marked) assert.ok(note.includes(host), `the note names ${host}: ${note}`);
  assert.match(note, /Delete deletes them again/);
  for (const k of ['start', 'stop', 'restart', 'reconfigure', 'upgrade', 'add', 'remove'])
    assert.equal(await page.isDisabled(`[data-testid=action-${k}]`), true, `${k} is not offered`);
  assert.equal(await page.isDisabled('[data-testid=action-scale]'), false, 'a scale deletes them again');
  assert.equal(await page.isDisabled('[data-testid=delete-cluster]'), false);
  await shot(page, 'cluster-delete-failed-nodes');
});
