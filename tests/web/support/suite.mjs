// One stack and one Chromium per test file; each test gets a fresh browser
// context (no cookies) and fails if the page threw. A failing test leaves a
// screenshot named FAILED-<test> and keeps the stack's directory with its logs.
import fs from 'node:fs';
import { test, before, after } from 'node:test';
import { startStack } from './stack.mjs';
import { openBrowser, newPage, shot } from './ui.mjs';
import { screenshotPath } from './browser.mjs';

export function useStack(options = {}) {
  const ctx = { failed: false, stack: null, browser: null };
  before(async () => {
    ctx.stack = await startStack(options);
    ctx.browser = await openBrowser();
  });
  after(async () => {
    if (ctx.browser) await ctx.browser.close();
    if (ctx.stack) {
      if (ctx.failed) console.log(`# the processes' logs are kept in ${ctx.stack.dir}`);
      await ctx.stack.cleanUp(ctx.failed);
    }
  });
  ctx.test = (name, fn, { width, height } = {}) => test(name, async () => {
    fs.rmSync(screenshotPath(`FAILED-${name}`), { force: true }); // from an earlier run
    const page = await newPage(ctx.browser, ctx.stack, { width, height });
    try {
      await fn(page, ctx.stack);
      if (page.errors.length) throw new Error(`the page threw: ${page.errors.join('; ')}`);
    } catch (e) {
      ctx.failed = true;
      await shot(page, `FAILED-${name}`).catch(() => {});
      e.message += `\n${ctx.stack.logs()}`;
      throw e;
    } finally {
      await page.context().close();
    }
  });
  return ctx;
}
