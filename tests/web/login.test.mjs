// Signing in and out of the web UI, with a password and with an API token.
import assert from 'node:assert/strict';
import { useStack } from './support/suite.mjs';
import { signIn, shot, api, pageCookie } from './support/ui.mjs';

const s = useStack();

s.test('the sign-in page is shown first, and a wrong password is refused beside the form', async (page) => {
  await page.goto('/');
  await page.waitForSelector('[data-testid=login-form]');
  // The superadmin's tenant is not the one a user would guess: the form says it.
  assert.match(await page.textContent('[data-testid=tenant-hint]'), /superadmin signs in with tenant _system/);
  await shot(page, 'login-page');
  await page.fill('input[name=tenant]', 'acme');
  await page.fill('input[name=user]', 'alice');
  await page.fill('input[name=password]', 'not-her-password');
  await page.click('[data-testid=login-submit]');
  const error = await page.waitForSelector('[data-testid=login-form] .error-note');
  // The tenant may be what is wrong: the message names it (not which of the three it is).
  assert.match(await error.textContent(), /Wrong tenant, user name or password/);
  assert.equal(await page.$('[data-testid=whoami]'), null);
  await shot(page, 'login-wrong-password');
  // A tenant that does not exist gets the very same words.
  await page.reload();
  await page.waitForSelector('[data-testid=login-form]');
  assert.equal(await page.$('[data-testid=login-form] .error-note'), null);
  await page.fill('input[name=tenant]', 'acme-typo');
  await page.fill('input[name=user]', 'alice');
  await page.fill('input[name=password]', 'alice-password-1');
  await page.click('[data-testid=login-submit]');
  await page.waitForSelector('[data-testid=login-form] .error-note:has-text("Wrong tenant, user name or password")');
  assert.equal(await page.$('[data-testid=whoami]'), null);
});

s.test('a user signs in, sees who they are, and signs out; the old cookie no longer works', async (page, stack) => {
  await signIn(page, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  const who = await page.textContent('[data-testid=whoami]');
  assert.match(who, /alice/);
  assert.match(who, /user · acme/);
  await page.waitForSelector('[data-testid=stat-clusters]');
  // The count of running jobs is named for what its table below shows.
  assert.equal(await page.$eval('[data-testid=stat-jobs]', (e) => e.parentElement.querySelector('.stat-label').textContent),
    'jobs running');
  await shot(page, 'overview');
  const cookie = await pageCookie(page);
  assert.ok(cookie, 'the gateway set the weft_session cookie');
  assert.equal((await api(stack, 'session', {}, { cookie, method: 'GET' })).status, 200);

  await page.click('[data-testid=logout]');
  await page.waitForSelector('[data-testid=login-form]');
  assert.match(await page.textContent('[data-testid=login-notice]'), /signed out/);
  const after = await api(stack, 'session', {}, { cookie, method: 'GET' });
  assert.equal(after.status, 401, 'the session ended on the server, not only in the browser');
  await page.reload();
  await page.waitForSelector('[data-testid=login-form]');
});

s.test('the session survives a reload of the page', async (page) => {
  await signIn(page, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  await page.reload();
  await page.waitForSelector('[data-testid=whoami]');
  assert.match(await page.textContent('[data-testid=whoami]'), /alice/);
});

s.test('an API token signs in as the user who made it', async (page, stack) => {
  const made = stack.weftOk(['token', 'create', '--name', 'ui-test'], { as: stack.credentialOf('acme', 'ada') });
  const token = made.trim();
  assert.ok(token, `weft token create printed a secret: ${made}`);
  await page.goto('/');
  await page.click('text=API token');
  await page.fill('input[name=token]', token);
  await page.click('[data-testid=login-submit]');
  await page.waitForSelector('[data-testid=whoami]');
  assert.match(await page.textContent('[data-testid=whoami]'), /ada/);
});

s.test('the layout works on a narrow screen', async (page) => {
  await signIn(page, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  await page.waitForSelector('[data-testid=stat-clusters]');
  assert.equal(await page.isVisible('[data-testid=logout]'), false, 'the nav is folded away');
  await page.click('.nav-toggle');
  await page.waitForSelector('[data-testid=logout]', { state: 'visible' });
  await shot(page, 'overview-narrow-nav');
}, { width: 420, height: 800 });

s.test('a user changes their own password and makes an API token on their account screen', async (page, stack) => {
  stack.makeUser('acme', 'carol', 'user', 'carol-password-1');
  const CAROL = { tenant: 'acme', user: 'carol', password: 'carol-password-1' };
  await signIn(page, CAROL);
  await page.click('.whoami-name');
  await page.waitForSelector('[data-testid=password-form]');
  await page.fill('input[name=token-name]', 'ci');
  await page.click('button:has-text("Create token")');
  const secret = (await page.textContent('[data-testid=token-secret]')).trim();
  assert.match(secret, /^weft_/);
  await page.waitForSelector('td:has-text("ci")');
  await shot(page, 'account');
  const byToken = await api(stack, 'cluster.list', {}, { token: secret });
  assert.equal(byToken.status, 200, `the token works: ${JSON.stringify(byToken.body)}`);

  await page.fill('input[name=new-password]', 'carol-password-2');
  await page.fill('input[name=new-password-again]', 'carol-password-2');
  await page.click('button:has-text("Change password")');
  await page.waitForSelector('[data-testid=login-form]');
  assert.match(await page.textContent('[data-testid=login-notice]'), /password is changed/);
  await page.fill('input[name=tenant]', 'acme');
  await page.fill('input[name=user]', 'carol');
  await page.fill('input[name=password]', 'carol-password-1');
  await page.click('[data-testid=login-submit]');
  await page.waitForSelector('[data-testid=login-form] .error-note');
  await signIn(page, { ...CAROL, password: 'carol-password-2' });
});

s.test('when the session ends elsewhere, the next screen asks to sign in again', async (page, stack) => {
  await signIn(page, { tenant: 'acme', user: 'alice', password: 'alice-password-1' });
  await page.waitForSelector('[data-testid=stat-clusters]');
  const cookie = await pageCookie(page);
  const me = await api(stack, 'session', {}, { cookie, method: 'GET' });
  const out = await api(stack, 'logout', {}, { cookie, csrf: me.body.csrf_token });
  assert.equal(out.status, 200, JSON.stringify(out.body));
  await page.click('a[href="#/clusters"]');
  await page.waitForSelector('[data-testid=login-form]');
  assert.match(await page.textContent('[data-testid=login-notice]'), /session has ended/);
});
