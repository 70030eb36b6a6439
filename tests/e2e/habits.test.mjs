// Looks and habits as a visitor meets them: every page at phone width in dark mode (screenshots,
// and nothing wider than the screen), the keyboard alone driving the sandbox and the rack, every
// control named, and a lost WebGPU device handing over to the CPU engine with the page's state
// kept.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot, assertConsole } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });

const PAGES = [
  ['sandbox', '#/sandbox', 'generator'],
  ['rack', '#/rack', 'rack-summary'],
  ['labs', '#/labs', 'lab-nvl72-story'],
  ['embed-pareto', '#/embed/pareto', 'rack-pareto'],
];

test('every page at phone width in dark mode fits the screen', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.emulateMedia({ colorScheme: 'dark' });
    for (const [name, hash, ready] of PAGES) {
      await page.goto(`${server.base}${hash}`);
      await page.getByTestId(ready).first().waitFor();
      // Charts and tables scroll inside their own boxes; the page itself never scrolls sideways.
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `${name}: the page is ${width} px wide at a 390 px screen`);
      const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const [r, g, b] = background.match(/\d+/g).map(Number);
      assert.ok(r + g + b < 150, `${name}: dark mode background is ${background}`);
      await screenshot(page, `dark-phone-${name}`);
    }
    assertConsole(problems);
  });
});

/** Presses Tab until the element with this test id has focus (at most `limit` presses). */
async function tabTo(page, id, limit = 80) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((t) => document.activeElement?.dataset?.testid === t, id)) return;
  }
  assert.fail(`Tab never reached ${id}`);
}

test('the keyboard alone generates text and moves the rack slider; every control has a name', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    for (const hash of ['#/sandbox', '#/rack', '#/labs']) {
      await page.goto(`${server.base}${hash}`);
      await page.locator('main').waitFor();
      await page.waitForTimeout(300);
      const unnamed = await page.evaluate(() => [...document.querySelectorAll('main input, main select, main button')]
        .filter((el) => !(el.labels?.length || el.getAttribute('aria-label') || el.textContent.trim()))
        .map((el) => el.outerHTML.slice(0, 80)));
      assert.deepEqual(unnamed, [], `${hash}: controls without a name`);
    }

    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await tabTo(page, 'gen-tokens');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('3');
    await tabTo(page, 'gen-run', 10);
    const runs = Number(await page.getByTestId('generator').getAttribute('data-runs'));
    await page.keyboard.press('Enter');
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n, runs, { timeout: 120_000 });
    assert.equal(await page.getByTestId('generator').getAttribute('data-status'), 'done');
    assert.equal(await page.locator('[data-testid=gen-experts] tbody tr').count(), 3);

    await page.goto(`${server.base}#/rack`);
    await page.getByTestId('rack-summary').waitFor();
    const users = await page.getByTestId('rack-users').locator('.stat-value').innerText();
    await tabTo(page, 'rack-load-slider');
    // Slower per user: more users per rack (ten steps of the log-scale slider).
    for (let i = 0; i < 10; i++) await page.keyboard.press('ArrowLeft');
    assert.notEqual(await page.getByTestId('rack-users').locator('.stat-value').innerText(), users);
    assertConsole(problems);
  });
});

test('a lost WebGPU device hands over to the CPU engine and keeps the settings', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    // Keep a handle on every device the page creates, so the test can destroy it as a driver
    // reset would (the app's own code never sees this).
    await page.addInitScript(() => {
      window.__devices = [];
      const request = GPUAdapter.prototype.requestDevice;
      GPUAdapter.prototype.requestDevice = async function (...args) {
        const device = await request.apply(this, args);
        window.__devices.push(device);
        return device;
      };
    });
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await page.getByTestId('gen-prompt').fill('Lost and found');
    await page.getByTestId('gen-tokens').fill('2');
    let runs = Number(await page.getByTestId('generator').getAttribute('data-runs'));
    await page.getByTestId('gen-run').click();
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n, runs, { timeout: 120_000 });
    assert.match(await page.getByTestId('gen-backend').innerText(), /WebGPU/);

    const destroyed = await page.evaluate(async () => {
      for (const d of window.__devices) { d.destroy(); await d.lost; }
      return window.__devices.length;
    });
    assert.ok(destroyed >= 1);
    runs = Number(await page.getByTestId('generator').getAttribute('data-runs'));
    await page.getByTestId('gen-run').click();
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n, runs, { timeout: 120_000 });
    assert.equal(await page.getByTestId('generator').getAttribute('data-status'), 'done', await page.getByTestId('generator').innerText());
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly/);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /device was lost/);
    assert.equal(await page.getByTestId('gen-prompt').inputValue(), 'Lost and found');
    await screenshot(page, 'sandbox-device-lost');
    // The destroyed device's own complaints are expected; nothing else may go wrong.
    assertConsole(problems);
  });
});
