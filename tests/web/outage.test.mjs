// weftd stopped and started again under open pages (an upgrade, a crash): a
// page keeps following the events once weftd is back, and reads its data
// again, so it shows what happened meanwhile; a screen opened while weftd was
// down says that weftd cannot be reached, and recovers by itself.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useStack } from './support/suite.mjs';
import { waitFor } from './support/stack.mjs';
import { signIn, shot } from './support/ui.mjs';

// A stream's session is checked every half second: an outage of a few seconds
// is many times that, as an outage past events.session_check_ms (60 s) is.
const s = useStack({
  gateway: { toml: '[events]\nsession_check_ms = 500\nkeepalive_ms = 500', weftdToml: 'timeout_ms = 3000' },
});
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };

s.test('pages open across a weftd restart show what happened meanwhile, without a reload', async (page, stack) => {
  const alice = stack.credentialOf('acme', 'alice');
  stack.weftOk(['cluster', 'create', 'steady', '--template', 'web-fake', '--size', '3', '--wait'], { as: alice });
  const { cluster } = stack.weftJson(['cluster', 'get', 'steady'], { as: alice });
  await signIn(page, ALICE);
  await page.goto(`/#/clusters/${cluster.id}`);
  await page.waitForSelector('[data-testid=cluster-name]');
  await page.evaluate(() => { window.__weftNotReloaded = true; });
  // A second tab of the same browser, on the overview.
  const other = await page.context().newPage();
  other.errors = [];
  other.on('pageerror', (e) => other.errors.push(e.message));
  await other.goto('/#/');
  await other.waitForSelector('[data-testid=whoami]', { state: 'attached' });

  await stack.stopWeftd();
  // The open page's stream stays open (weft-web is up): weft-web tells it that
  // weftd cannot be reached, and the page says that live updates are paused.
  await page.waitForSelector('[data-testid=live-paused]');
  // The streams' session checks fail while weftd is down (the gateway logs the first failure).
  await waitFor(() => fs.readFileSync(stack.gateway.log, 'utf8').includes('cannot be reached'),
    'weft-web to notice that weftd is down', 60000);
  // A screen opened now cannot load: it says why, and that it tries again.
  await other.click('a[href="#/clusters"]');
  const note = await other.waitForSelector('[role=alert]:has-text("weftd cannot be reached")');
  assert.match(await note.textContent(), /start weftd/);
  await other.waitForSelector('[data-testid=retrying]');
  await other.waitForSelector('[data-testid=live-paused]');
  await shot(other, 'outage-clusters-while-weftd-is-down');
  // A tab opened now cannot even learn who is signed in: it says why, and asks again by itself.
  const late = await page.context().newPage();
  late.errors = [];
  late.on('pageerror', (e) => late.errors.push(e.message));
  await late.goto('/#/clusters');
  await late.waitForSelector('[data-testid=login-form] [role=alert]:has-text("weftd cannot be reached")');

  await stack.restartWeftd();
  // Told that weftd is back, without a reload.
  await page.waitForSelector('[data-testid=live-paused]', { state: 'detached', timeout: 60000 });
  // A job run with the CLI once weftd is back: the open cluster page shows it.
  stack.weftOk(['cluster', 'restart', 'steady', '--wait'], { as: alice });
  const job = stack.weftJson(['cluster', 'get', 'steady'], { as: alice }).cluster.latest_job;
  assert.ok(job && String(job) !== String(cluster.latest_job), `a new job: ${job}, ${cluster.latest_job}`);
  await page.waitForSelector(`[data-testid=jobs] a[href="#/jobs/${job}"]`, { timeout: 60000 });
  assert.equal(await page.evaluate(() => window.__weftNotReloaded), true, 'the page was not reloaded');
  await shot(page, 'outage-cluster-after-weftd-is-back');
  // The screen that could not load recovers by itself.
  await other.waitForSelector('[data-testid=clusters] [data-testid=cluster-link]:has-text("steady")', { timeout: 60000 });
  await other.waitForSelector('[data-testid=live-paused]', { state: 'detached', timeout: 60000 });
  assert.equal(await other.$('[role=alert]'), null, 'no error is left on the recovered screen');
  await shot(other, 'outage-clusters-after-weftd-is-back');
  assert.deepEqual(other.errors, []);
  // The tab opened during the outage finds the session, and shows its screen.
  await late.waitForSelector('[data-testid=clusters] [data-testid=cluster-link]:has-text("steady")', { timeout: 60000 });
  assert.deepEqual(late.errors, []);
});
