// Chromium through playwright-core, with the flags a headless test run needs.
// playwright-core comes from the npm install the ctest fixture ran into the
// build directory (WEFT_WEB_NODE_MODULES), else from this folder's node_modules.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);

function loadPlaywright() {
  const dirs = [process.env.WEFT_WEB_NODE_MODULES, path.join(here, '..', 'node_modules')].filter(Boolean);
  for (const dir of dirs) {
    if (fs.existsSync(path.join(dir, 'playwright-core'))) return createRequire(path.join(dir, 'x.js'))('playwright-core');
  }
  throw new Error(`playwright-core is not installed in ${dirs.join(' or ')}; run npm ci in tests/web`);
}

export const CHROMIUM = process.env.WEFT_CHROMIUM || '/usr/bin/chromium';

export async function launchChromium() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs it)`);
  const { chromium } = loadPlaywright();
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage',
    ],
  });
}

// Where screenshots go: the build directory's tests/web/screenshots.
export function screenshotPath(name) {
  const dir = process.env.WEFT_WEB_SCREENSHOTS || path.join(process.cwd(), 'screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, name.replace(/[^a-z0-9_.-]+/gi, '-') + '.png');
}
