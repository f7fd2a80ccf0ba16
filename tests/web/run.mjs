// Runs one browser test file under node's test runner, or says why it cannot
// and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE): a machine
// without Chromium or without the npm packages does not fail the suite, and
// does not hide the tests either.
//   node run.mjs FILE.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const SKIP = 77;
const file = process.argv[2];
const chromium = process.env.WEFT_CHROMIUM || '/usr/bin/chromium';
const modules = process.env.WEFT_WEB_NODE_MODULES || path.join(path.dirname(new URL(import.meta.url).pathname), 'node_modules');

if (!fs.existsSync(chromium)) {
  console.log(`SKIPPED: no Chromium at ${chromium} (scripts/install-deps.sh installs Debian's chromium)`);
  process.exit(SKIP);
}
if (!fs.existsSync(path.join(modules, 'playwright-core'))) {
  console.log(`SKIPPED: playwright-core is not installed in ${modules} (the web_ui/npm_ci test installs it with npm ci)`);
  process.exit(SKIP);
}
const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', file], { stdio: 'inherit' });
process.exit(r.status ?? 1);
