// What a visitor sees when something outside the app fails: a bad checkpoint, a worker script
// that does not load, a GPU that cannot run the sandbox, storage that refuses, an address full of
// nonsense. Each gives a clear message, and the page goes on working.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serveDist, withPage, screenshot, assertConsole, dist } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });


async function generate(page, tokens) {
  const panel = page.getByTestId('generator');
  const before = Number(await panel.getAttribute('data-runs'));
  await page.getByTestId('gen-tokens').fill(String(tokens));
  await page.getByTestId('gen-run').click();
  await page.waitForFunction(
    (n) => Number(document.querySelector('[data-testid=generator]')?.dataset.runs) > n,
    before, { timeout: 240_000 });
  assert.equal(await panel.getAttribute('data-status'), 'done', await panel.innerText());
  assert.equal(await page.locator('[data-testid=gen-experts] tbody tr').count(), tokens);
}

async function weightsSource(page) {
  await page.waitForFunction(
    () => ['trained', 'synthetic'].includes(document.querySelector('[data-testid=weights-source]')?.dataset.source),
    null, { timeout: 60_000 });
  const source = page.getByTestId('weights-source');
  return { kind: await source.getAttribute('data-source'), text: await source.innerText() };
}

// Served with status 200, so only the loader can tell (the page and the CPU worker each fetch
// the file).
const real = await readFile(join(dist, 'deepseek-mini-int8.safetensors'));
const oversized = Buffer.alloc(80 << 20);

/** The page with `body` served as the checkpoint: it says why it was refused, and generates. */
async function refusedCheckpoint(body, message, shot) {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    // From the test's own server: 80 MB through the browser's request interception is more
    // than it carries.
    const bad = await serveDist({ overrides: { 'deepseek-mini-int8.safetensors': body } });
    try {
      await page.goto(`${bad.base}#/sandbox`);
      await page.getByTestId('generator').waitFor();
      await generate(page, 2);
      const source = await weightsSource(page);
      assert.equal(source.kind, 'synthetic', source.text);
      assert.match(source.text, message);
      if (shot) await screenshot(page, shot);
      assertConsole(problems);
    } finally {
      await bad.close();
    }
  });
}

test('a corrupt checkpoint is refused with the reason and the sandbox runs synthetic weights', () =>
  refusedCheckpoint(Buffer.from('this is not a safetensors file, whatever the server says'),
    /could not be loaded \(the weight file is not valid safetensors: header too large\)/));

test('a truncated checkpoint is refused with the reason and the sandbox runs synthetic weights', () =>
  refusedCheckpoint(real.subarray(0, real.length >> 1),
    /could not be loaded \(the weight file is not valid safetensors: incomplete metadata, file not fully covered\)/,
    'sandbox-bad-checkpoint'));

test('an oversized checkpoint is refused before it is read and the sandbox runs synthetic weights', () =>
  refusedCheckpoint(oversized,
    /could not be loaded \(deepseek-mini-int8\.safetensors is 83\.9 MB; the sandbox reads at most 67 MB\)/));

test('when the worker script does not load, the CPU engine runs on the page and says why', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.context().route('**/cpu-worker.js', (route) => route.fulfill({ status: 404, body: 'gone' }));
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly \(fallback, f64 accumulation\) on the main thread/);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /no Web Worker could be started \(the CPU worker failed/);
    // The next run does not try the broken worker again.
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-backend').innerText(), /on the main thread/);
    // The worker's failed request is logged in the worker's console, not the page's.
    assertConsole(problems);
  });
});

test('an adapter whose limits are too small is named, and the CPU engine runs instead', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.addInitScript(() => {
      const request = GPU.prototype.requestAdapter;
      GPU.prototype.requestAdapter = async function (...args) {
        const adapter = await request.apply(this, args);
        if (!adapter) return adapter;
        const limits = {};
        for (const key in adapter.limits) limits[key] = adapter.limits[key];
        limits.maxStorageBuffersPerShaderStage = 4;
        Object.defineProperty(adapter, 'limits', { value: limits });
        return adapter;
      };
    });
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /WebGPU is not usable \(.*max_storage_buffers_per_shader_stage: need 8, adapter has 4.*\)/);
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly/);
    assertConsole(problems);
  });
});

test('a refused requestDevice is reported, and the CPU engine runs instead', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.addInitScript(() => {
      GPUAdapter.prototype.requestDevice = () => Promise.reject(new DOMException('planted refusal', 'OperationError'));
    });
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 2);
    assert.match(await page.getByTestId('gen-fallback').innerText(), /WebGPU is not usable \(.*planted refusal.*\)/);
    assert.match(await page.getByTestId('gen-backend').innerText(), /CPU reference in WebAssembly/);
    assertConsole(problems);
  });
});

// The app keeps its state in the URL; only the labs' progress is stored. A browser that blocks
// storage, or whose storage is full, must not break any page, and the labs say what it means.
async function withStorage(script, reason) {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.addInitScript(script);
    await page.goto(`${server.base}#/rack`);
    await page.getByTestId('rack-summary').waitFor();
    await page.goto(`${server.base}#/labs`);
    await page.getByTestId('lab-step-0').waitFor();
    await page.getByTestId('lab-predict-0').fill('80');
    await page.getByTestId('lab-run-0').click();
    await page.getByTestId('lab-result-0').waitFor();
    assert.equal(await page.getByTestId('lab-progress-problem').innerText(),
      `Progress is not saved: ${reason}. It lasts until you leave the page; export it to keep it.`);
    await page.getByTestId('lab-progress').locator('summary').click();
    assert.equal(await page.getByTestId('lab-export').isVisible(), true, 'the export is offered');
    await page.goto(`${server.base}#/sandbox`);
    await page.getByTestId('generator').waitFor();
    await generate(page, 2);
    assertConsole(problems);
  });
}

test('with localStorage disabled every page still works', () => withStorage(() =>
  Object.defineProperty(window, 'localStorage', { get() { throw new DOMException('The operation is insecure.', 'SecurityError'); } }),
'this browser does not let the page use localStorage'));

test('with localStorage full every page still works', () => withStorage(() => {
  Storage.prototype.setItem = () => { throw new DOMException('The quota has been exceeded.', 'QuotaExceededError'); };
}, 'localStorage is full or read-only'));

test('an embed address with every parameter out of range lists each one and still renders', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    const rack = {
      v: '9', preset: 'nope', system: 'tpu-v9', model: 'gpt-9', phase: 'dream', weights: 'fp2',
      act: 'fp1', kv: 'int3', gpus: '0', tp: '-1', ep: 'many', prefill_gpus: '1e9', prefill_tp: '0',
      decode_gpus: 'x', in: '0', out: '-5', load: 'warp', at: '1e99', opt: 'magic', spec: 'oracle',
      drafts: '99', zzz: '1',
    };
    const query = Object.entries(rack).map(([k, v]) => `${k}=${v}`).join('&');
    await page.goto(`${server.base}#/embed/rack-summary?${query}`);
    await page.getByTestId('rack-summary').waitFor();
    const items = await page.getByTestId('embed-warnings').locator('li').allInnerTexts();
    assert.equal(items.length, Object.keys(rack).length, items.join('\n'));
    for (const [key, value] of Object.entries(rack)) {
      assert.ok(items.some((i) => i.includes(key) || i.includes(value)), `${key}=${value}: ${items.join('\n')}`);
    }
    assert.match(await page.getByTestId('rack-users').innerText(), /\d/);
    await screenshot(page, 'embed-out-of-range');

    const sandbox = { v: '9', prompt: 'x'.repeat(500), tokens: '99999', opt: 'warp', format: 'fp3', dispatch: 'fp4', zzz: '1' };
    const q = Object.entries(sandbox).map(([k, v]) => `${k}=${v}`).join('&');
    await page.goto(`${server.base}#/embed/sandbox-mini?${q}`);
    await page.getByTestId('generator').waitFor();
    await page.getByTestId('embed-warnings').waitFor();
    const sandboxItems = await page.getByTestId('embed-warnings').locator('li').allInnerTexts();
    assert.equal(sandboxItems.length, Object.keys(sandbox).length, sandboxItems.join('\n'));
    await generate(page, 2);

    await page.goto(`${server.base}#/embed/lab?v=9&lab=nope&zzz=1`);
    await page.getByTestId('embed-warnings').waitFor();
    const labItems = await page.getByTestId('embed-warnings').locator('li').allInnerTexts();
    assert.equal(labItems.length, 3, labItems.join('\n'));
    assertConsole(problems);
  });
});
