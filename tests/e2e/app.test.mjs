// The site as a visitor uses it: the gemv kernel check on WebGPU, bad addresses, no WebGPU.
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
    await page.getByTestId('rack-placeholder').waitFor();
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
