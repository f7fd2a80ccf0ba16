// A task that fails for good: the job screen shows its message and output,
// the graph marks it, and the job can be retried.
import assert from 'node:assert/strict';
import { useStack } from './support/suite.mjs';
import { signIn, shot } from './support/ui.mjs';

// fake-redis's START always fails (fake-automator's fail_actions).
const s = useStack({ patch: (stack) => stack.patchService('fake-redis', 'start', { fail_actions: 'START' }) });
const ALICE = { tenant: 'acme', user: 'alice', password: 'alice-password-1' };

s.test('the failed task\'s message and output are on the job screen', async (page) => {
  await signIn(page, ALICE);
  await page.goto('/#/create?template=web-fake');
  await page.fill('input[name=name]', 'broken');
  await page.check('text=keep what was made');
  await page.click('[data-testid=preview]');
  await page.waitForSelector('[data-testid=plan-summary]');
  await page.click('[data-testid=create]');
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
});
