// Browser tests of the admin catalog screens against the real weftd, weft-host
// and weft-web: a provider's form is generated from its plugin's field schema
// and keeps a sensitive field write-only; the catalog is exported as one file
// and imported back, unchanged entities keeping their versions.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useStack } from './support/suite.mjs';
import { signIn, shot } from './support/ui.mjs';

const ctx = useStack();
const ADA = { tenant: 'acme', user: 'ada', password: 'ada-password-1' };

ctx.test('a provider form comes from the plugin schema and a sensitive field stays write-only', async (page, stack) => {
  await signIn(page, ADA);
  await page.goto('/#/admin/providers');
  await page.click('[data-entity=fake]');
  // fake-provider declares these fields (plugin.list); the form has an input for each.
  await page.waitForSelector('.plugin-fields[data-plugin=fake-provider]');
  assert.equal(await page.getAttribute('#provisioner-latency_ms', 'type'), 'number');
  assert.equal(await page.getAttribute('#provisioner-api_token', 'type'), 'password');

  await page.fill('#provisioner-latency_ms', '7');
  await page.fill('#provisioner-api_token', 'tok-s3cret-value');
  await page.click('.entity-editor button.primary');
  await page.getByText("Saved provider 'fake' as version 2.").waitFor();

  const v2 = stack.weftJson(['provider', 'get', 'fake'], { tenant: 'acme' });
  assert.equal(v2.entity.provisioner.latency_ms, 7);
  const sealed = v2.entity.provisioner.api_token;
  assert.match(sealed, /^enc:v2:/, 'weftd sealed the token');

  // The editor shows that a value is set, never the value.
  assert.equal(await page.inputValue('#provisioner-api_token'), '');
  await page.getByText('set (sealed); type to replace it').waitFor();
  assert.ok(!(await page.content()).includes('tok-s3cret-value'), 'the page does not hold the secret');
  await shot(page, 'admin-provider-sealed');

  // Saving again without typing a secret keeps the sealed one as it is.
  await page.fill('#entity-description', 'fake nodes, with a token');
  await page.click('.entity-editor button.primary');
  await page.getByText("Saved provider 'fake' as version 3.").waitFor();
  const v3 = stack.weftJson(['provider', 'get', 'fake'], { tenant: 'acme' });
  assert.equal(v3.entity.description, 'fake nodes, with a token');
  assert.equal(v3.entity.provisioner.api_token, sealed);
  assert.equal(v3.entity.provisioner.latency_ms, 7);

  // Saving with nothing changed keeps the version: weftd finds the entity equal to it.
  await page.click('.entity-editor button.primary');
  await page.getByText("No change: provider 'fake' stays version 3.").waitFor();
  await shot(page, 'admin-provider-unchanged');
  assert.equal(stack.weftJson(['provider', 'get', 'fake'], { tenant: 'acme' }).version, 3);

  // So does an import that gives the secret in the clear, equal to the sealed one.
  const clear = structuredClone(v3.entity);
  clear.provisioner.api_token = 'tok-s3cret-value';
  await page.goto('/#/admin/catalog');
  await page.setInputFiles('#catalog-files', { name: 'fake.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify({ providers: [clear] })) });
  await page.click('text=Import 1 file');
  const report = page.locator('.import-report');
  await report.waitFor();
  assert.match(await report.innerText(), /^0 imported, 1 unchanged, 0 skipped, 0 refused\./);
  const kept = stack.weftJson(['provider', 'get', 'fake'], { tenant: 'acme' });
  assert.equal(kept.version, 3);
  assert.equal(kept.entity.provisioner.api_token, sealed);
});

ctx.test('the catalog is exported as one file and imported back; only changed entities get a version', async (page, stack) => {
  await signIn(page, ADA);
  await page.goto('/#/admin/catalog');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('text=Export the catalog')]);
  const bundle = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
  const names = (folder) => bundle[folder].map((e) => e.name).sort();
  for (const [kind, folder] of [['provider', 'providers'], ['service', 'services'], ['clustertemplate', 'clustertemplates']]) {
    const listed = stack.weftJson([kind, 'list'], { tenant: 'acme' }).entities.map((e) => e.name).sort();
    assert.deepEqual(names(folder), listed, `the export holds every ${kind}`);
  }
  const total = Object.values(bundle).reduce((n, list) => n + list.length, 0);

  const redis = bundle.services.find((s) => s.name === 'fake-redis');
  redis.description = 'Redis, edited in an exported file';
  await page.setInputFiles('#catalog-files', { name: 'weft-catalog.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(bundle)) });
  await page.click('text=Import 1 file');
  const report = page.locator('.import-report');
  await report.waitFor();
  assert.match(await report.innerText(), new RegExp(`^1 imported, ${total - 1} unchanged, 0 skipped, 0 refused\\.`));
  await report.getByText("imported service 'fake-redis' (version 2)").waitFor();
  await shot(page, 'admin-catalog-imported');

  const stored = stack.weftJson(['service', 'get', 'fake-redis'], { tenant: 'acme' });
  assert.equal(stored.version, 2);
  assert.equal(stored.entity.description, 'Redis, edited in an exported file');
  assert.equal(stack.weftJson(['service', 'get', 'fake-nginx'], { tenant: 'acme' }).version, 1);

  // A file weftd refuses is reported with weftd's sentence; the others go in.
  const broken = { services: [{ name: 'broken', dependencies: { conflicts: ['broken'] } }] };
  await page.setInputFiles('#catalog-files', { name: 'broken.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(broken)) });
  await page.click('text=Import 1 file');
  await report.getByText(/refused broken\.json: services\[0\]: service 'broken'/).waitFor();
});

ctx.test('a service and a hardware type are edited in their forms; what the forms do not show is kept', async (page, stack) => {
  await signIn(page, ADA);
  const before = stack.weftJson(['service', 'get', 'fake-monitoring'], { tenant: 'acme' }).entity;
  await page.goto('/#/admin/services');
  await page.click('[data-entity=fake-monitoring]');
  await page.fill('#dep-conflicts', 'fake-legacy-monitoring');
  await page.check('input[name=action-initialize]');
  await page.selectOption('#action-initialize-type', 'fake-automator');
  await page.fill('#action-initialize-latency_ms', '5');
  await page.fill('#action-initialize-password', 'init-secret-1');
  await page.click('.entity-editor button.primary');
  await page.getByText("Saved service 'fake-monitoring' as version 2.").waitFor();
  await shot(page, 'admin-service-edited');

  const after = stack.weftJson(['service', 'get', 'fake-monitoring'], { tenant: 'acme' }).entity;
  assert.deepEqual(after.dependencies.conflicts, ['fake-legacy-monitoring']);
  assert.deepEqual(after.dependencies.install, before.dependencies.install);
  assert.deepEqual(after.dependencies.runtime, before.dependencies.runtime);
  const init = after.provisioner.actions.initialize;
  assert.equal(init.type, 'fake-automator');
  assert.equal(init.fields.latency_ms, 5);
  assert.match(init.fields.password, /^enc:v2:/, 'the automator declares password sensitive: weftd sealed it');
  for (const action of ['install', 'configure', 'start', 'stop']) {
    assert.deepEqual(after.provisioner.actions[action], before.provisioner.actions[action], `${action} is as it was`);
  }

  await page.goto('/#/admin/hardwaretypes');
  await page.click('[data-entity=small]');
  await page.fill('input[name="fake.flavor"]', 'fake-tiny');
  await page.click('.entity-editor button.primary');
  await page.getByText("Saved hardwaretype 'small' as version 2.").waitFor();
  const small = stack.weftJson(['hardwaretype', 'get', 'small'], { tenant: 'acme' }).entity;
  assert.deepEqual(small.providermap.fake, { flavor: 'fake-tiny' });
  assert.deepEqual(small.providermap.local, { flavor: 'small' });
});
