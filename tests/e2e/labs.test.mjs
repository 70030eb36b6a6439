// The labs as a student uses them: predict, run, read the check and the explanation; the rack lab
// anywhere (wasm), the kernel-fusion lab on WebGPU, and a clear message without WebGPU.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot, assertConsole } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });

async function predictAndRun(page, i, value) {
  await page.getByTestId(`lab-predict-${i}`).fill(String(value));
  await page.getByTestId(`lab-run-${i}`).click();
  const result = page.getByTestId(`lab-result-${i}`);
  await result.waitFor({ timeout: 240_000 });
  return result;
}

test('the NVL72 lab checks predictions against the rack model and explains', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/labs`);
    await page.getByTestId('lab-nvl72-story').waitFor();
    // Run is disabled until a prediction is entered.
    assert.equal(await page.getByTestId('lab-run-0').isDisabled(), true);
    let r = await predictAndRun(page, 0, 75);
    assert.equal(await r.getAttribute('data-close'), 'true');
    assert.match(await r.innerText(), /tokens\/s per user \(computed by the rack model, an estimate\)/);
    assert.match(await page.getByTestId('lab-explain-0').innerText(), /Measured: 77/);
    // A far-off prediction is told how far off it is.
    r = await predictAndRun(page, 1, 300);
    assert.equal(await r.getAttribute('data-close'), 'false');
    assert.match(await r.innerText(), /off by -\d+%/);
    r = await predictAndRun(page, 3, 958);
    assert.equal(await r.getAttribute('data-close'), 'true');
    await screenshot(page, 'labs-nvl72');
    // The kernel-fusion lab without WebGPU says what it needs.
    await page.getByTestId('lab-open-kernel-fusion').click();
    r = await predictAndRun(page, 0, 100);
    assert.match(await r.innerText(), /needs WebGPU/);
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'labs-phone');
    assertConsole(problems);
  });
});

test('the kernel-fusion lab measures the visitor\'s GPU', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/labs`);
    await page.getByTestId('lab-open-kernel-fusion').click();
    let r = await predictAndRun(page, 0, 140);
    assert.match(await r.innerText(), /^140 kernels \(measured on your GPU\)/);
    assert.equal(await r.getAttribute('data-close'), 'true');
    r = await predictAndRun(page, 1, 66);
    assert.match(await r.innerText(), /^66 kernels/);
    r = await predictAndRun(page, 2, 2);
    assert.match(await r.innerText(), /^[\d.]+ × faster/);
    await screenshot(page, 'labs-kernel-fusion');
    assert.deepEqual(problems, []);
  });
});

test('the FP8 training lab charts the recorded runs and checks predictions against them', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/labs`);
    await page.getByTestId('lab-open-fp8-training').click();
    const chart = page.getByTestId('loss-curves');
    await chart.waitFor();
    assert.equal(await chart.locator('path.loss-curve').count(), 3);
    assert.match(await chart.innerText(), /BF16, seed 0[\s\S]*BF16, seed 1[\s\S]*FP8, seed 0/);
    let r = await predictAndRun(page, 0, 1.0);
    assert.equal(await r.getAttribute('data-close'), 'true');
    assert.match(await r.innerText(), /^1\.0\d nats per byte \(measured once on an H200 and recorded, not run in your browser\)/);
    r = await predictAndRun(page, 2, 50);
    assert.equal(await r.getAttribute('data-close'), 'false');
    assert.match(await page.getByTestId('lab-explain-2').innerText(), /smaller than the gap between two BF16 seeds/);
    await screenshot(page, 'labs-fp8-training');
    assertConsole(problems);
  });
});

test('a lab\'s address opens it, Share gives that address, and a lab embeds alone', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/labs?v=1&lab=fp8-training`);
    await page.getByTestId('lab-fp8-training').waitFor();
    assert.equal(await page.getByTestId('lab-open-fp8-training').getAttribute('aria-pressed'), 'true');
    // Opening another lab rewrites the address; Share gives it and an iframe of the lab alone.
    await page.getByTestId('lab-open-kernel-fusion').click();
    await page.getByTestId('lab-kernel-fusion').waitFor();
    assert.match(page.url(), /#\/labs\?v=1&lab=kernel-fusion$/);
    await page.getByTestId('labs-share').click();
    assert.match(await page.getByTestId('labs-share-url').inputValue(), /#\/labs\?v=1&lab=kernel-fusion$/);
    assert.match(await page.getByTestId('labs-embed-code').inputValue(), /<iframe src="[^"]*#\/embed\/lab\?v=1&amp;lab=kernel-fusion" .*sandbox="allow-scripts"/);
    // A bad address says what it could not use and opens the first lab. (No reload: the page
    // rewrites its address to the settings it uses, so a reload would read the corrected one.)
    await page.goto(`${server.base}#/labs?v=1&lab=nope&zzz=1`);
    await page.getByTestId('labs-warnings').waitFor();
    assert.match(await page.getByTestId('labs-warnings').innerText(), /lab nope: there is no such lab[\s\S]*zzz: not a setting/);
    await page.getByTestId('lab-nvl72-story').waitFor();
    // The embed: the lab and its steps, no site chrome.
    await page.goto(`${server.base}#/embed/lab?v=1&lab=nvl72-story`);
    await page.getByTestId('embed').waitFor();
    await page.getByTestId('lab-nvl72-story').waitFor();
    assert.equal(await page.locator('.site-header').count(), 0);
    await page.getByTestId('lab-predict-0').fill('80');
    await page.getByTestId('lab-run-0').click();
    assert.match(await page.getByTestId('lab-result-0').innerText(), /tokens\/s per user/);
    await screenshot(page, 'embed-lab');
    assertConsole(problems);
  });
});
