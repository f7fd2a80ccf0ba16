// A task that fails for good: the job screen shows its message and output,
// the graph marks it, and the job can be retried.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useStack } from './support/suite.mjs';
import { waitFor } from './support/stack.mjs';
import { signIn, shot } from './support/ui.mjs';

// fake-redis's START always fails (fake-automator's fail_actions).
const s = useStack({ patch: (stack) => stack.patchService('fake-redis', 'start', { fail_actions: 'START' }) });
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };
const BOB = { tenant: 'globex', user: 'bob', password: 'bob-password-1' };

// In `tenant`, installing fake-base takes `ms`.
function slowBase(stack, tenant, ms) {
  const file = `${stack.dir}/base-${ms}ms.json`;
  const base = JSON.parse(fs.readFileSync(`${stack.catalogDir()}/services/fake-base.json`, 'utf8'));
  base.provisioner.actions.install.fields.latency_ms = ms;
  fs.writeFileSync(file, JSON.stringify(base));
  stack.weftOk(['service', 'put', file], { tenant });
}

// Creates a web-fake cluster from the create screen, after its plan preview.
async function createCluster(page, name, { keep = false } = {}) {
  await page.goto('/#/create?template=web-fake');
  await page.fill('input[name=name]', name);
  if (keep) await page.check('text=keep what was made');
  await page.click('[data-testid=preview]');
  await page.waitForSelector('[data-testid=plan-summary]');
  await page.click('[data-testid=create]');
}

s.test('the failed task\'s message and output are on the job screen', async (page) => {
  await signIn(page, ALICE);
  await createCluster(page, 'broken', { keep: true });
  await page.waitForSelector('[data-testid=job-progress][data-status=failed]', { timeout: 120000 });
  assert.match(await page.textContent('[data-testid=job-message]'), /fake-redis|START/);
  await shot(page, 'cluster-failed');

  await page.click('[data-testid=job-progress] a');
  const failed = await page.waitForSelector('[data-testid=failed-tasks]');
  const text = await failed.textContent();
  assert.match(text, /START/);
  assert.match(text, /fails because fail_actions lists it/);
  assert.match(await page.textContent('[data-testid=failed-tasks] [data-testid=stdout]'), /fake: waits/);

  await page.click('[data-testid=dag] .dag-node[data-state=failed]');
  const detail = await page.waitForSelector('[data-testid=task-detail]');
  assert.match(await detail.textContent(), /fake-redis/);
  const attempts = await page.$$eval('[data-testid=task-detail] table tbody tr', (rows) => rows.length);
  assert.equal(attempts, 2, 'both attempts are listed ([jobs] max_attempts = 2)');
  assert.ok(await page.$('[data-testid=retry]'), 'a failed job that was kept can be retried');
  await shot(page, 'job-failed-task');
  // A retry runs the job as planned; a catalog fix needs an upgrade, and the dialog says so.
  await page.click('[data-testid=retry]');
  const ask = await page.textContent('[role=dialog]');
  assert.match(ask, /service definitions and config it was made with/);
  assert.match(ask, /use Upgrade on the cluster instead/);
  await page.click('[role=dialog] button:has-text("Cancel")');
});

s.test('after a retry the job screen still shows what failed in the earlier run', async (page, stack) => {
  await signIn(page, ALICE);
  const { cluster } = stack.weftJson(['cluster', 'get', 'broken'], { tenant: 'acme' });
  const id = String(cluster.latest_job);
  await page.goto(`/#/jobs/${id}`);
  await page.click('[data-testid=retry]');
  await page.click('[data-testid=confirm]');
  // The retried run fails again (fake-redis's START always fails): the CLI lists run 1's failures.
  await waitFor(() => {
    const { job } = stack.weftJson(['job', 'show', id], { tenant: 'acme' });
    return job.status === 'failed' && (job.history || []).length === 1;
  }, 'the retried job to fail again', 120000);
  assert.match(stack.weftOk(['job', 'show', id], { tenant: 'acme' }), /earlier runs[\s\S]*fails because fail_actions lists it/);
  const earlier = await page.waitForSelector('[data-testid=earlier-runs] [data-testid=earlier-failed-tasks][data-run="1"]',
    { timeout: 60000 });
  const text = await earlier.textContent();
  assert.match(text, /What failed in run 1/);
  assert.match(text, /START/);
  assert.match(text, /fails because fail_actions lists it/);
  assert.match(await page.textContent('[data-testid=earlier-failed-tasks] [data-testid=stdout]'), /fake: waits/);
  await shot(page, 'job-earlier-run-failures');
});

s.test('a running job is aborted from its screen after a confirmation', async (page, stack) => {
  // In tenant globex, installing fake-base takes a minute: the job is surely still running.
  slowBase(stack, 'globex', 60000);
  await signIn(page, BOB);
  await createCluster(page, 'slow');
  await page.waitForSelector('[data-testid=job-progress][data-status=running]');
  await page.click('[data-testid=job-progress] a');
  await page.click('[data-testid=abort]');
  await shot(page, 'job-abort-confirmation');
  await page.click('[data-testid=confirm]');
  await page.waitForSelector('[data-testid=job-progress][data-status=aborted]');
  assert.equal(await page.$('[data-testid=abort]'), null, 'an aborted job offers no abort');
  assert.ok(await page.$('[data-testid=retry]'), 'and may be retried');
  await page.waitForSelector('[data-testid=dag] .dag-node[data-state=cancelled]');
  // The bar counts the cancelled tasks, as `weft job show` does.
  await page.waitForSelector('[data-testid=job-progress] .progress-label:has-text("cancelled")');
  await shot(page, 'job-aborted');
});

s.test('a running job\'s time keeps counting while no event comes', async (page, stack) => {
  // In tenant globex, installing fake-base takes a minute; the page's event
  // stream is never answered, so nothing but the clock can change what it shows.
  slowBase(stack, 'globex', 60000);
  await page.route('**/api/v1/events**', () => {});
  await signIn(page, BOB);
  await createCluster(page, 'ticking');
  const elapsed = await page.waitForSelector('[data-testid=job-progress][data-status=running] [data-testid=job-elapsed]');
  const first = await elapsed.textContent();
  assert.match(first, /running for/);
  await page.waitForFunction((was) => document.querySelector('[data-testid=job-elapsed]').textContent !== was, first);
  await page.unrouteAll({ behavior: 'ignoreErrors' });
});

s.test('a job that ends before the screen\'s event stream opens is shown ended', async (page, stack) => {
  // In tenant globex, installing fake-base takes 5 s: the cluster screen's
  // first read sees the job running.
  slowBase(stack, 'globex', 5000);
  // The browser's event stream is held until the job has ended, so no event
  // about the job reaches the screen: only a read once the stream is open can
  // show the end.
  let open;
  const opened = new Promise((resolve) => { open = resolve; });
  await page.route('**/api/v1/events**', async (route) => { await opened; await route.continue(); });

  await signIn(page, BOB);
  await createCluster(page, 'unseen', { keep: true });
  await page.waitForSelector('[data-testid=job-progress][data-status=running]');
  const ended = await waitFor(() => {
    const { cluster } = stack.weftJson(['cluster', 'get', 'unseen'], { tenant: 'globex' });
    const { job } = stack.weftJson(['job', 'show', String(cluster.latest_job)], { tenant: 'globex' });
    return ['succeeded', 'failed'].includes(job.status) && job.status;
  }, 'the job of cluster unseen to end', 120000);
  open();
  await page.waitForSelector(`[data-testid=job-progress][data-status=${ended}]`, { timeout: 30000 });
});

s.test('a job\'s end shows in the card, the jobs table and the cluster\'s badge as its events arrive', async (page, stack) => {
  // In tenant acme, installing fake-base takes 3 s: the screen's first read
  // sees the job running. After that read, every read of the cluster is held,
  // so only the job's and the cluster's events can show the end.
  slowBase(stack, 'acme', 3000);
  let holding = false;
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  await page.route('**/api/v1/cluster.get', async (route) => {
    if (holding) await released;
    await route.continue();
  });

  await signIn(page, ALICE);
  await createCluster(page, 'watched', { keep: true });
  await page.waitForSelector('[data-testid=job-progress][data-status=running]');
  holding = true;
  await page.waitForSelector('[data-testid=job-progress][data-status=failed]', { timeout: 120000 });
  await page.waitForSelector('[data-testid=jobs] .badge[data-status=failed]', { timeout: 10000 });
  const took = await page.textContent('[data-testid=jobs] tbody tr td:nth-child(6)');
  assert.notEqual(took.trim(), '—', 'the ended job\'s row says how long it took');
  const { cluster } = stack.weftJson(['cluster', 'get', 'watched'], { tenant: 'acme' });
  assert.notEqual(cluster.status, 'pending', 'the failed create moved the cluster on');
  await page.waitForSelector(`[data-testid=cluster-name] ~ .badge[data-status=${cluster.status}]`, { timeout: 10000 });
  release();
});

s.test('a create that failed and was undone says so at the top of the cluster screen, with the failure\'s message', async (page) => {
  await signIn(page, ALICE);
  await createCluster(page, 'undone');
  const note = await page.waitForSelector('[data-testid=undone-note]:has-text("was undone")', { timeout: 120000 });
  const text = await note.textContent();
  assert.match(text, /The create failed and was undone/);
  assert.match(text, /fake-redis|START/);
  await page.waitForSelector('[data-testid=job-progress][data-status=succeeded]');
  await shot(page, 'cluster-create-undone');
});

s.test('a job waiting for a plugin no live host runs names it in a sentence', async (page, stack) => {
  // weftd's reply as it is when no live host runs the plugin (the rig's host runs them all).
  await page.route('**/api/v1/job.get', async (route) => {
    try {
      const response = await route.fetch();
      const body = await response.json();
      if (body.job) body.job.waiting_for_plugins = ['fake-automator', 'fake-provider'];
      await route.fulfill({ response, json: body });
    } catch { /* the page closed while the read was under way */ }
  });
  await signIn(page, ALICE);
  const { cluster } = stack.weftJson(['cluster', 'get', 'broken'], { tenant: 'acme' });
  await page.goto(`/#/jobs/${cluster.latest_job}`);
  const note = await page.waitForSelector('[data-testid=waiting-for-plugins]');
  const said = await note.textContent();
  assert.match(said, /^Waiting for a live host that runs fake-automator, fake-provider\./);
  // Why, as `weft status` counts the hosts: the rig's one host is live.
  await page.waitForSelector('[data-testid=waiting-why]:has-text("1 host is connected, and none offers them")');
  // The cluster's screen says it too, in its latest job's card.
  await page.goto(`/#/clusters/${cluster.id}`);
  await page.waitForSelector('[data-testid=job-progress] [data-testid=waiting-for-plugins]');
  // With no live host at all, it says that instead.
  await page.route('**/api/v1/server.status', async (route) => {
    try {
      const response = await route.fetch();
      const body = await response.json();
      body.hosts = { registered: 1, live: 0 };
      await route.fulfill({ response, json: body });
    } catch { /* the page closed while the read was under way */ }
  });
  await page.reload();
  await page.waitForSelector('[data-testid=job-progress] [data-testid=waiting-why]:has-text("No host is connected (1 registered, none live)")');
  await page.unrouteAll({ behavior: 'ignoreErrors' });
});

s.test('a change refused because a job runs says so in the UI\'s words, once, and the buttons then wait for the job', async (page, stack) => {
  // In tenant acme, installing fake-base takes 1 s for the cluster's create; then a minute,
  // for an upgrade that reinstalls it: that job surely still runs while the dialog is used.
  slowBase(stack, 'acme', 1000);
  const alice = stack.credentialOf('acme', 'alice');
  // (Its create fails, fake-redis's START, and what it made is kept.)
  stack.weft(['cluster', 'create', 'busy', '--template', 'web-fake', '--size', '3', '--keep-on-failure', '--wait'],
    { as: alice });
  const { cluster } = stack.weftJson(['cluster', 'get', 'busy'], { as: alice });
  await signIn(page, ALICE);
  await page.goto(`/#/clusters/${cluster.id}`);
  await page.waitForSelector('[data-testid=job-progress][data-status=failed], [data-testid=job-progress][data-status=succeeded]');
  assert.equal(await page.$('[data-testid=actions-busy]'), null, 'no job runs yet');
  await page.click('[data-testid=action-scale]');
  await page.fill('[data-testid=scale-size]', '4');
  // Meanwhile someone starts a job on the cluster.
  slowBase(stack, 'acme', 60000);
  stack.weftOk(['cluster', 'upgrade', 'busy'], { as: alice });
  const job = String(stack.weftJson(['cluster', 'get', 'busy'], { as: alice }).cluster.latest_job);

  await page.click('.modal button:has-text("Preview")');
  const note = await page.waitForSelector('[role=dialog] [role=alert]');
  const words = await note.$eval('.error-message', (e) => e.textContent);
  assert.match(words, new RegExp(`This cluster is busy: job #${job} \\(upgrade\\) is running`));
  assert.doesNotMatch(words, /weft job|job\.get|`/, 'no CLI or protocol names in the UI\'s words');
  // weftd's own sentence stays, on a line of its own.
  assert.match(await note.$eval('[data-testid=error-detail]', (e) => e.textContent), /CONFLICT: .*weft job watch/);
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/v1/cluster.scale')),
    page.click('[data-testid=run-change]'),
  ]);
  await page.waitForFunction(() => !document.querySelector('[data-testid=run-change]').disabled
    && document.querySelector('[role=dialog] [role=alert]'));
  assert.equal((await page.$$('[role=dialog] [role=alert]')).length, 1, 'the same refusal is said once');
  await shot(page, 'cluster-busy-refusal');
  await page.click('[role=dialog] [aria-label=Close]');

  // The page knows the job runs: the changes wait for it, and say why.
  await page.waitForSelector('[data-testid=actions-busy]');
  assert.match(await page.textContent('[data-testid=actions-busy]'), new RegExp(`job #${job} \\(upgrade\\) ends`));
  for (const k of ['scale', 'add', 'remove', 'start', 'stop', 'restart', 'reconfigure', 'upgrade', 'lease'])
    assert.equal(await page.isDisabled(`[data-testid=action-${k}]`), true, `${k} waits for the job`);
  assert.match(await page.getAttribute('[data-testid=action-scale]', 'title'), /is running/);
  await shot(page, 'cluster-busy-actions');
  stack.weftOk(['job', 'abort', job], { as: alice });
});
