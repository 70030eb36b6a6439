// The site as a visitor uses it: the gemv kernel check and text generation on WebGPU, bad
// addresses, and generation on the CPU fallback without WebGPU.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });

test('the gemv kernel check passes on WebGPU and shows adapter and time', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    const check = page.getByTestId('gemv-check');
    await check.waitFor();
    await page.waitForFunction(
      () => document.querySelector('[data-testid=gemv-check]')?.dataset.status !== 'running',
      null, { timeout: 120_000 });
    const status = await check.getAttribute('data-status');
    const detail = await check.innerText();
    assert.equal(status, 'pass', detail);
    assert.match(await page.getByTestId('gemv-verdict').innerText(), /matches the reference/);
    assert.match(await page.getByTestId('gemv-time').innerText(), /µs per dispatch .* GB\/s/);
    assert.match(await page.getByTestId('gemv-timer').innerText(), /timestamp|wall-clock/);
    assert.notEqual((await page.getByTestId('adapter-name').innerText()).trim(), '');
    assert.equal(await page.getByTestId('webgpu-banner').count(), 0);
    await screenshot(page, 'sandbox-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'sandbox-phone');
    assert.deepEqual(problems, []);
  });
});

test('bad addresses show a message and the app keeps working', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/definitely-not-a-page`);
    const error = page.getByTestId('route-error');
    await error.waitFor();
    assert.match(await error.innerText(), /definitely-not-a-page/);
    await screenshot(page, 'bad-route');

    await page.goto(`${server.base}#/embed/no-such-view?v=1&x=%ZZ`);
    await page.getByTestId('route-error').waitFor();
    assert.match(await page.getByTestId('route-error').innerText(), /no-such-view/);

    // Still alive: navigating on to a real page works.
    await page.goto(`${server.base}#/rack`);
    await page.getByTestId('rack-calibration').waitFor();
    await page.goto(`${server.base}#/embed/pareto?v=1`);
    await page.getByTestId('embed').waitFor();
    assert.deepEqual(problems, []);
  });
});

test('without WebGPU the page says so instead of crashing', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('webgpu-banner').waitFor();
    await page.waitForFunction(
      () => document.querySelector('[data-testid=gemv-check]')?.dataset.status === 'error',
      null, { timeout: 60_000 });
    assert.match(await page.getByTestId('gemv-error').innerText(), /GPU/);
    await screenshot(page, 'no-webgpu');
    assert.deepEqual(problems.filter((p) => !/WebGPU|adapter/i.test(p)), []);
  });
});

/** Clicks Generate and waits for the run to end; returns the panel's text. */
async function generate(page, tokens) {
  const panel = page.getByTestId('generator');
  const before = Number(await panel.getAttribute('data-runs'));
  await page.getByTestId('gen-tokens').fill(String(tokens));
  await page.getByTestId('gen-run').click();
  await page.waitForFunction(
    (n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n,
    before, { timeout: 240_000 });
  assert.equal(await panel.getAttribute('data-status'), 'done', await panel.innerText());
  return panel;
}

/** The expert table: one row per generated token, two experts (E0..E15) per MoE layer. */
async function assertExpertRows(page, tokens) {
  const rows = page.locator('[data-testid=gen-experts] tbody tr');
  assert.equal(await rows.count(), tokens);
  const cells = await rows.first().locator('td').allInnerTexts();
  assert.equal(cells.length, 4, cells.join(' | '));
  for (const c of cells.slice(1)) assert.match(c, /^E\d+ E\d+$/);
}

test('the sandbox generates tokens on WebGPU with tokens/s and experts per token', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await page.getByTestId('gen-prompt').fill('Route me');
    await generate(page, 6);
    assert.match(await page.getByTestId('gen-backend').innerText(), /WebGPU, eager/);
    assert.equal(await page.getByTestId('gen-fallback').count(), 0);
    const stats = await page.getByTestId('gen-stats').innerText();
    assert.match(stats, /[\d.]+ tokens\/s/);
    assert.match(stats, /1\d\d kernels per step/);
    assert.match(stats, /MB read and written per step/);
    await assertExpertRows(page, 6);
    await screenshot(page, 'sandbox-generated');
    assert.deepEqual(problems, []);
  });
});

test('without WebGPU the sandbox generates on the CPU fallback and says so', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 8);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /CPU reference compiled to WebAssembly/);
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly/);
    assert.match(await page.getByTestId('gen-stats').innerText(), /tokens\/s/);
    await assertExpertRows(page, 8);
    // Bad input gives a message, and the panel still works afterwards.
    await page.getByTestId('gen-tokens').fill('0');
    await page.getByTestId('gen-run').click();
    assert.match(await page.getByTestId('gen-error').innerText(), /1 to 256/);
    await generate(page, 2);
    await screenshot(page, 'sandbox-cpu-fallback');
    assert.deepEqual(problems.filter((p) => !/WebGPU|adapter/i.test(p)), []);
  });
});

test('the rack page shows the calibration, computed in wasm, every point within its bound', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/rack`);
    const card = page.getByTestId('rack-calibration');
    await card.waitFor();
    assert.equal(await card.getAttribute('data-all-within'), 'true');
    const rows = await page.getByTestId('rack-residual').count();
    assert.ok(rows >= 10, `${rows} calibration rows`);
    assert.match(await card.innerText(), /estimate/);
    await screenshot(page, 'rack-calibration');
    assert.deepEqual(problems.filter((p) => !/WebGPU|adapter/i.test(p)), []);
  });
});
