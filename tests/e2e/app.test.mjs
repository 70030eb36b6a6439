// The site as a visitor uses it: the gemv kernel check and text generation on WebGPU, bad
// addresses, and generation on the CPU fallback without WebGPU.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot, outputDir, assertConsole } from './harness.mjs';

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
    assertConsole(problems);
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
  const cells = (await rows.first().locator('td').allTextContents()).map((c) => c.trim());
  assert.equal(cells.length, 4, cells.join(' | '));
  for (const c of cells.slice(1)) assert.match(c, /^E\d+ E\d+$/);
  // The heatmap: a row per token, two filled cells per token and layer.
  const heatmap = page.getByTestId('expert-heatmap');
  assert.equal(await heatmap.getAttribute('data-tokens'), String(tokens));
  assert.equal(await heatmap.locator('rect.cell-on').count(), tokens * 3 * 2);
}

test('the sandbox generates on WebGPU; flipping the switches changes the kernels and the timeline', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await page.getByTestId('gen-prompt').fill('Route me');
    // Every switch is on by default: 66 kernels in one command buffer.
    await generate(page, 4);
    assert.match(await page.getByTestId('gen-backend').innerText(), /WebGPU on .*optimizations: all/);
    assert.equal(await page.getByTestId('gen-fallback').count(), 0);
    let stats = await page.getByTestId('gen-stats').innerText();
    assert.match(stats, /[\d.]+ tokens\/s/);
    assert.match(stats, /66 kernels in 1 queue submissions per step/);
    assert.match(stats, /MB read and written per step/);
    assert.equal(await page.getByTestId('timeline-svg').getAttribute('data-kernels'), '66');
    assert.match(await page.getByTestId('timeline-summary').innerText(), /66 kernels · [\d.]+ µs of GPU time/);
    await assertExpertRows(page, 4);
    const fusedText = await page.getByTestId('gen-output').innerText();
    // The correctness badge re-runs prompt + output on the GPU and on the CPU reference.
    await page.getByTestId('gen-check').click();
    const badge = page.getByTestId('correctness-badge');
    await badge.waitFor({ timeout: 120_000 });
    assert.equal(await badge.getAttribute('data-passed'), 'true', await badge.innerText());
    assert.match(await badge.innerText(), /Matches the CPU reference: max \|Δlogit\| [\d.e+-]+ over \d+ positions/);
    await screenshot(page, 'sandbox-generated');

    // The eager baseline: the same tokens, 140 kernels, one submission each.
    await page.getByTestId('opt-none').click();
    assert.equal(await page.getByTestId('opt-recorded_submission').isChecked(), false);
    await generate(page, 4);
    stats = await page.getByTestId('gen-stats').innerText();
    assert.match(stats, /140 kernels in 140 queue submissions per step/);
    assert.equal(await page.getByTestId('timeline-svg').getAttribute('data-kernels'), '140');
    assert.equal(await page.getByTestId('gen-output').innerText(), fusedText);

    // One switch alone: split-K attention swaps 3 attention kernels for 2 in each of 4 layers.
    await page.getByTestId('opt-split_k_attention').check();
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-stats').innerText(), /136 kernels in 136 queue submissions/);
    await page.getByTestId('kernel-timeline').screenshot({ path: `${outputDir}/timeline-split-k.png` });
    // Before/after in one click: eager against the current switches (split-K alone now).
    await page.getByTestId('gen-compare').click();
    const cmp = page.getByTestId('gen-compare-result');
    await cmp.waitFor({ timeout: 240_000 });
    assert.match(await cmp.innerText(), /Eager: [\d.]+ ms per decode step, 140 kernels in 140 submissions\. Current switches \(split_k_attention\): [\d.]+ ms, 136 kernels in 136 submissions: [\d.]+×/);
    assert.deepEqual(problems, []);
  });
});

test('a weight format and FP8 expert inputs are picked, generate on WebGPU, and report their accuracy against f32', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await page.getByTestId('gen-format').selectOption('nvfp4');
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-backend').innerText(), /nvfp4 weights \([\d.]+ MB on the GPU\)/);
    const badge = page.getByTestId('correctness-badge');
    await page.getByTestId('gen-check').click();
    await badge.waitFor({ timeout: 120_000 });
    assert.equal(await badge.getAttribute('data-passed'), 'n/a', await badge.innerText());

    // One accuracy run covers both choices (on SwiftShader it takes minutes; the CLI tests
    // measure each alone on lavapipe).
    await page.getByTestId('gen-dispatch-fp8').check();
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-backend').innerText(), /nvfp4 weights \([\d.]+ MB on the GPU\), FP8 expert inputs/);
    await page.getByTestId('format-measure').click();
    const result = page.getByTestId('format-accuracy');
    // About 250 s on SwiftShader with two idle cores; the limit leaves room for a loaded machine.
    await result.waitFor({ timeout: 600_000 });
    const text = await result.innerText();
    assert.match(text, /nvfp4 with FP8 expert inputs against f32 over \d+ positions .*top-1 agreement [\d.]+%, KL divergence [\d.e+-]+ nats, max logit error [\d.]+; 0\.563 bytes per parameter/, text);
    await page.getByTestId('format-picker').screenshot({ path: `${outputDir}/format-picker.png` });

    // FP8 expert inputs with f32 weights: the same math as the reference's FP8 dispatch, so the
    // check passes. This prompt's expert inputs are clear of FP8 rounding ties (measured by
    // engine/tests/checkpoint.rs), so nothing here is excused.
    await page.getByTestId('gen-format').selectOption('f32');
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-backend').innerText(), /f32 weights \([\d.]+ MB on the GPU\), FP8 expert inputs/);
    // A new run clears the last check, so the badge that appears is this one's.
    assert.equal(await badge.count(), 0);
    await page.getByTestId('gen-check').click();
    await badge.waitFor({ timeout: 120_000 });
    assert.equal(await badge.getAttribute('data-passed'), 'true', await badge.innerText());
    assert.deepEqual(problems, []);
  });
});

test('the switch benchmark runs every variant on WebGPU with the same logits', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('decode-bench').waitFor();
    await page.getByTestId('bench-steps').fill('1');
    await page.getByTestId('bench-run').click();
    await page.waitForFunction(
      () => ['done', 'error'].includes(document.querySelector('[data-testid=decode-bench]')?.dataset.status),
      null, { timeout: 600_000 });
    const card = page.getByTestId('decode-bench');
    assert.equal(await card.getAttribute('data-status'), 'done', await card.innerText());
    const rows = page.getByTestId('bench-row');
    assert.equal(await rows.count(), 10);
    const cells = async (variant) => page.locator(`[data-testid=bench-row][data-variant=${variant}] td`).allInnerTexts();
    const none = await cells('none');
    const all = await cells('all');
    assert.equal(none[3], '140');
    assert.equal(all[3], '66');
    assert.equal(all[4], '1');
    // Every variant's logits agree with the baseline's far inside the model tolerance.
    for (const row of await rows.all()) {
      const diff = Number((await row.locator('td').allInnerTexts())[7]);
      assert.ok(diff < 1e-4, `max |Δlogit| ${diff}`);
    }
    await card.screenshot({ path: `${outputDir}/decode-bench.png` });
    assert.deepEqual(problems, []);
  });
});

test('without WebGPU the sandbox generates on the CPU fallback and says so', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 8);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /CPU reference compiled to WebAssembly/);
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly \(fallback, f64 accumulation\) in a Web Worker/);
    assert.match(await page.getByTestId('gen-stats').innerText(), /tokens\/s/);
    await assertExpertRows(page, 8);
    // Stop reaches the worker: a long run ends early, with what it had.
    await page.getByTestId('gen-tokens').fill('256');
    const runs = Number(await page.getByTestId('generator').getAttribute('data-runs'));
    await page.getByTestId('gen-run').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=gen-experts] tbody tr').length >= 3, null, { timeout: 60_000 });
    await page.getByTestId('gen-stop').click();
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n, runs, { timeout: 60_000 });
    const stopped = await page.locator('[data-testid=gen-experts] tbody tr').count();
    assert.ok(stopped >= 3 && stopped < 256, `${stopped} tokens after Stop`);
    // Bad input gives a message, and the panel still works afterwards.
    await page.getByTestId('gen-tokens').fill('0');
    await page.getByTestId('gen-run').click();
    assert.match(await page.getByTestId('gen-error').innerText(), /1 to 256/);
    await generate(page, 2);
    await screenshot(page, 'sandbox-cpu-fallback');
    assertConsole(problems);
  });
});

test('the rack page shows the calibration, computed in wasm, every point within its bound, and the validation it was never fitted to', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/rack`);
    const card = page.getByTestId('rack-calibration');
    await card.waitFor();
    assert.equal(await card.getAttribute('data-all-within'), 'true');
    const rows = await page.getByTestId('rack-residual').count();
    assert.ok(rows >= 9, `${rows} calibration rows`);
    assert.match(await card.innerText(), /estimate/);
    const validation = page.getByTestId('rack-validation');
    await validation.waitFor();
    assert.ok(await page.getByTestId('rack-validation-row').count() >= 20);
    assert.match(await validation.innerText(), /none used in the fit\. The model is off by a median of \d+% and at most \d+%/);
    assert.match(await validation.getAttribute('data-meets-targets'), /^(true|false)$/);
    await screenshot(page, 'rack-calibration');
    assertConsole(problems);
  });
});

/**
 * The same crude check of "readable English" as engine/tests/checkpoint.rs: letters, spaces and
 * common punctuation; English word lengths; at least three English function words.
 */
function assertEnglish(text) {
  const plain = [...text].filter((c) => /[A-Za-z .,;:'()\-\n]/.test(c)).length;
  assert.ok(plain / Math.max(1, text.length) >= 0.9, `not letters and spaces: ${JSON.stringify(text)}`);
  const words = text.split(/[^A-Za-z]+/).filter(Boolean);
  const mean = words.reduce((s, w) => s + w.length, 0) / Math.max(1, words.length);
  assert.ok(mean >= 2 && mean <= 9, `mean word length ${mean}: ${JSON.stringify(text)}`);
  const fn = new Set(['the', 'of', 'a', 'an', 'is', 'are', 'to', 'and', 'in', 'that', 'be', 'for', 'as', 'it', 'by', 'with']);
  const found = new Set(words.map((w) => w.toLowerCase()).filter((w) => fn.has(w)));
  assert.ok(found.size >= 3, `function words ${[...found]}: ${JSON.stringify(text)}`);
}

for (const webgpu of [true, false]) {
  test(`the trained checkpoint loads and writes English on ${webgpu ? 'WebGPU' : 'the CPU fallback'}`, async () => {
    await withPage({ webgpu }, async ({ page, problems }) => {
      await page.goto(`${server.base}#/sandbox`);
      const source = page.getByTestId('weights-source');
      await page.waitForFunction(
        () => ['trained', 'synthetic'].includes(document.querySelector('[data-testid=weights-source]')?.dataset.source),
        null, { timeout: 60_000 });
      assert.equal(await source.getAttribute('data-source'), 'trained', await source.innerText());
      assert.match(await source.innerText(), /Python 3\.11 documentation .* int8 .*\(13\.\d MB\)/);
      await page.getByTestId('gen-prompt').fill('The Python interpreter');
      // No layout jump while generating: the controls and the output box stay where they were.
      const box = async () => [await page.getByTestId('gen-run').boundingBox(), await page.getByTestId('gen-output').boundingBox()];
      const [runBefore, outBefore] = await box();
      await generate(page, 40);
      const [runAfter, outAfter] = await box();
      assert.equal(runAfter.y, runBefore.y);
      assert.equal(outAfter.y, outBefore.y);
      assert.equal(outAfter.height, outBefore.height, '40 tokens fit the output box without growing it');
      const text = await page.getByTestId('gen-output').innerText();
      assertEnglish(`The Python interpreter${text}`);
      // 40 tokens are enough for the specialization table to name some experts.
      const spec = page.getByTestId('expert-specialization');
      assert.match(await spec.innerText(), /MoE layer 1/);
      if (webgpu) await screenshot(page, 'sandbox-trained');
      assertConsole(problems);
    });
  });
}

test('when the checkpoint cannot be fetched the sandbox says why and runs synthetic weights', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.route('**/deepseek-mini-int8.safetensors', (route) => route.fulfill({ status: 404, body: 'gone' }));
    await page.goto(`${server.base}#/sandbox`);
    await page.waitForFunction(
      () => ['trained', 'synthetic'].includes(document.querySelector('[data-testid=weights-source]')?.dataset.source),
      null, { timeout: 60_000 });
    const source = page.getByTestId('weights-source');
    assert.equal(await source.getAttribute('data-source'), 'synthetic');
    assert.match(await source.innerText(), /could not be loaded \(deepseek-mini-int8\.safetensors: HTTP 404\)/);
    await generate(page, 4);
    // Chromium logs every failed response itself; that line is the only one.
    assertConsole(problems, ['Failed to load resource: the server responded with a status of 404 (Not Found)']);
  });
});
