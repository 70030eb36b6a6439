// The rack explorer as a visitor uses it: drag the load slider and see the numbers move, share a
// link and get the same numbers, embed one view, and load addresses with bad settings.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot, assertConsole } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });

const number = async (page, id) => Number((await page.getByTestId(id).locator('.stat-number').innerText()).replace(/[^\d.]/g, ''));

test('every rack figure carries its out-of-sample error band; the Pareto chart draws the validation points with their errors', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/rack?v=1&preset=nvl72-serve`);
    await page.getByTestId('rack-summary').waitFor();
    const band = await page.getByTestId('rack-error-band').innerText();
    assert.match(band, /model estimate/);
    assert.match(band, /off by a median of ±\d+% \(at most ±\d+%\) on \d+ public measurements of its regime, high concurrency/);
    const bands = await page.getByTestId('rack-summary').locator('.stat-band').allInnerTexts();
    assert.equal(bands.length, 6);
    for (const b of bands) assert.match(b, /^\s*±\d+%$/);
    const pareto = page.getByTestId('rack-pareto');
    await pareto.locator('svg').waitFor();
    const points = pareto.getByTestId('pareto-validation-point');
    assert.equal(await points.count(), 5, 'the five InferenceX GB200 runs');
    for (const label of await points.locator('.pareto-residual-label').allTextContents()) {
      assert.match(label, /^[+-]\d+%$/);
    }
    assert.match(await points.first().locator('title').textContent(), /measured; not fitted\); the model gives \d+ .*\([+-]\d+%\)/);
    assert.match(await pareto.locator('.legend').innerText(), /measured, not fitted \(validation\)/);
    await screenshot(page, 'rack-validation-points');
    // The seeds' decode rack: its two points are the fitted ones.
    await page.goto(`${server.base}#/rack?v=1&preset=nvl72-decode`);
    await page.getByTestId('rack-summary').waitFor();
    await pareto.locator('svg').waitFor();
    assert.equal(await pareto.getByTestId('pareto-calibration-point').count(), 2);
    assert.equal(await pareto.getByTestId('pareto-validation-point').count(), 0);
    assertConsole(problems);
  });
});

test('dragging the load slider moves users per rack; the shared link gives the same numbers', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/rack`);
    await page.getByTestId('rack-explorer').waitFor();
    await page.getByTestId('rack-summary').waitFor();
    // The seeds' rack at 83 tokens/s per user: the model's estimate lands near the 958 users.
    const users = await number(page, 'rack-users');
    assert.ok(users > 800 && users < 1100, `${users} users per rack`);
    assert.match(await page.getByTestId('rack-tps-user').innerText(), /tokens\/s per user/);
    await page.getByTestId('rack-pareto').locator('svg').waitFor();
    await page.getByTestId('rack-waterfall').locator('svg').waitFor();
    await screenshot(page, 'rack-desktop');

    // A higher target speed per user serves fewer users.
    await page.getByTestId('rack-load-slider').fill('480');
    const value = await page.getByTestId('rack-load-value').innerText();
    assert.match(value, /tokens\/s per user/);
    const faster = await number(page, 'rack-users');
    assert.notEqual(faster, users);
    assert.ok(faster < users, `${faster} vs ${users}`);
    // Turning PDL off changes the numbers too.
    await page.getByTestId('rack-opt-pdl').uncheck();
    const noPdl = await number(page, 'rack-users');
    assert.notEqual(noPdl, faster);

    await page.getByTestId('rack-share').click();
    const url = await page.getByTestId('rack-share-url').inputValue();
    assert.match(url, /#\/rack\?v=1&/);
    assert.match(await page.getByTestId('rack-embed-code').inputValue(), /<iframe src=".*#\/embed\/rack-summary\?v=1&.*sandbox="allow-scripts"/);
    const tps = await page.getByTestId('rack-tps-user').locator('.stat-number').innerText();

    await page.goto('about:blank');
    await page.goto(url);
    await page.getByTestId('rack-summary').waitFor();
    assert.equal(await number(page, 'rack-users'), noPdl);
    assert.equal(await page.getByTestId('rack-tps-user').locator('.stat-number').innerText(), tps);
    assert.equal(await page.getByTestId('rack-opt-pdl').isChecked(), false);
    assert.equal(await page.getByTestId('rack-warnings').count(), 0);

    // At phone width the page itself does not scroll sideways (a wide chart scrolls in its box).
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the phone`);
    await screenshot(page, 'rack-phone');
    // Dark mode: the page, the charts' tick labels and their grid lines all change colour, and
    // the labels stay readable against the background.
    const colours = () => page.evaluate(() => {
      const style = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
      return {
        background: style('body', 'backgroundColor'),
        tick: style('[data-testid=rack-pareto] svg .timeline-tick', 'fill'),
        grid: style('[data-testid=rack-pareto] svg .timeline-grid', 'stroke'),
      };
    });
    const light = await colours();
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 1280, height: 900 });
    const dark = await colours();
    for (const key of Object.keys(light)) assert.notEqual(dark[key], light[key], `${key} in dark mode`);
    const luminance = (rgb) => rgb.match(/\d+/g).slice(0, 3).map(Number).reduce((a, b) => a + b, 0) / 3;
    assert.ok(luminance(dark.tick) - luminance(dark.background) > 80, JSON.stringify(dark));
    await screenshot(page, 'rack-dark');
    assertConsole(problems);
  });
});

test('embedded views render alone and report settings they cannot read', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.setViewportSize({ width: 720, height: 480 });
    await page.goto(`${server.base}#/embed/pareto?v=1&system=gb200-nvl72&model=deepseek-r1&phase=decode&load=target&at=60`);
    await page.getByTestId('rack-pareto').locator('svg').waitFor();
    assert.equal(await page.locator('.site-header').count(), 0);
    await screenshot(page, 'embed-pareto');

    await page.goto(`${server.base}#/embed/rack-summary?v=7&system=tpu-v9&gpus=-4&zzz=1`);
    await page.getByTestId('rack-summary').waitFor();
    const warnings = await page.getByTestId('embed-warnings').innerText();
    assert.match(warnings, /tpu-v9/);
    assert.match(warnings, /zzz/);
    assert.match(warnings, /gpus/);
    await screenshot(page, 'embed-rack-summary-bad-settings');

    await page.goto(`${server.base}#/embed/waterfall?v=1`);
    await page.getByTestId('rack-waterfall').locator('svg').waitFor();

    // A malformed rack address: the page says what it replaced and still works.
    await page.goto(`${server.base}#/rack?v=1&opt=warp_drive&at=%ZZ`);
    await page.getByTestId('rack-warnings').waitFor();
    assert.match(await page.getByTestId('rack-warnings').innerText(), /warp_drive/);
    await page.getByTestId('rack-summary').waitFor();
    assertConsole(problems);
  });
});
