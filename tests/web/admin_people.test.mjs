// Browser tests of the admin screens for people against the real weftd,
// weft-host and weft-web: a tenant admin creates a user and sets their
// password, the user signs in, and is deleted; an API token is made (its
// secret shown once), works, and stops working when revoked.
import assert from 'node:assert/strict';
import { useStack } from './support/suite.mjs';
import { newPage, signIn, shot, api } from './support/ui.mjs';

const ctx = useStack();
const ADA = { tenant: 'acme', user: 'ada', password: 'ada-password-1' };

// A sign-in over HTTP: {status, body}.
async function login(stack, credentials) {
  const r = await fetch(`${stack.url}/api/v1/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(credentials),
  });
  return { status: r.status, body: await r.json() };
}

ctx.test('an admin creates a user, sets their password, the user signs in, and is deleted', async (page, stack) => {
  await signIn(page, ADA);
  await page.goto('/#/admin/users');
  await page.fill('input[name=user-name]', 'carol');
  await page.selectOption('select[name=user-role]', 'user');
  await page.click('text=Create user');
  await page.getByText('User carol (user) created in tenant acme').waitFor();
  const row = page.locator('[data-user=carol]');
  await row.getByText('Set password').click();
  await row.locator('input[name=password]').fill('carol-password-1');
  await row.locator('input[name=password-again]').fill('carol-password-2');
  await row.locator('button[type=submit]').click();
  await row.getByText('the two passwords differ').waitFor();
  await row.locator('input[name=password-again]').fill('carol-password-1');
  await row.locator('button[type=submit]').click();
  await page.getByText('Password of carol set.').waitFor();
  await shot(page, 'admin-user-created');

  const users = stack.weftJson(['user', 'list'], { tenant: 'acme' }).users;
  assert.equal(users.find((u) => u.name === 'carol').role, 'user');

  const carol = await newPage(ctx.browser, stack);
  await signIn(carol, { tenant: 'acme', user: 'carol', password: 'carol-password-1' });
  assert.match(await carol.locator('[data-testid=whoami]').innerText(), /carol/);
  assert.deepEqual(carol.errors, []);
  await carol.context().close();

  await row.getByText('Delete').click();
  await page.click('[data-testid=confirm]');
  await row.waitFor({ state: 'detached' });
  assert.ok(!stack.weftJson(['user', 'list'], { tenant: 'acme' }).users.some((u) => u.name === 'carol'));
  const refused = await login(stack, { tenant: 'acme', user: 'carol', password: 'carol-password-1' });
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.equal(refused.body.error.message, 'wrong user name or password');
});

ctx.test('an API token is shown once, acts as its maker, and is refused once revoked', async (page, stack) => {
  await signIn(page, ADA);
  await page.goto('/#/admin/tokens');
  await page.fill('input[name=token-name]', 'ci');
  await page.fill('input[name=token-ttl]', '2d');
  await page.click('text=Create token');
  const secret = (await page.locator('[data-token-secret]').innerText()).trim();
  assert.ok(secret.length > 20, `a secret is shown: ${secret}`);
  await shot(page, 'admin-token-created');

  const listed = stack.weftJson(['token', 'list'], { tenant: 'acme' }).tokens.find((t) => t.name === 'ci');
  assert.equal(listed.user, 'ada');
  const twoDays = 2 * 24 * 3600 * 1000;
  assert.ok(Math.abs(listed.expires_at_ms - listed.created_at_ms - twoDays) < 1000, 'it expires after the 2d asked for');

  const used = await api(stack, 'user.list', {}, { token: secret });
  assert.equal(used.status, 200, JSON.stringify(used.body));
  assert.equal(used.body.tenant, 'acme');

  await page.click('text=Done');
  assert.equal(await page.locator('[data-token-secret]').count(), 0, 'the secret is gone from the page');
  const row = page.locator(`[data-token="${listed.id}"]`);
  await row.getByText('Revoke').click();
  assert.match(await page.textContent('[role=dialog]'), /browser sessions signed in with it end/);
  await page.click('[data-testid=confirm]');
  await row.waitFor({ state: 'detached' });
  const refused = await api(stack, 'user.list', {}, { token: secret });
  assert.equal(refused.status, 401, JSON.stringify(refused.body));
});
