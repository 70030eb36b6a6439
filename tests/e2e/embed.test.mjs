// Safe to embed: the Content-Security-Policy is in force (an injected inline script does not
// run), and a widget works inside a sandboxed iframe (allow-scripts only: opaque origin, no
// storage), as a blog would embed it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveDist, withPage, screenshot, assertConsole } from './harness.mjs';

let server;
before(async () => { server = await serveDist(); });
after(async () => { await server.close(); });

test('the CSP blocks inline script and the app runs under it', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/rack`);
    await page.getByTestId('rack-summary').waitFor();
    const csp = await page.locator('meta[http-equiv=Content-Security-Policy]').getAttribute('content');
    assert.match(csp, /script-src 'self' 'wasm-unsafe-eval'/);
    const outcome = await page.evaluate(() => new Promise((resolve) => {
      document.addEventListener('securitypolicyviolation', (e) => resolve(`blocked ${e.violatedDirective}`), { once: true });
      const s = document.createElement('script');
      s.textContent = 'window.__inlineRan = true;';
      document.body.appendChild(s);
      setTimeout(() => resolve(window.__inlineRan ? 'ran' : 'no event'), 2000);
    }));
    assert.match(outcome, /^blocked script-src/);
    // The app itself caused no violation: the injected script's is the only one (the hash is
    // that of its text).
    assertConsole(problems, [
      "Executing inline script violates the following Content Security Policy directive 'script-src 'self' 'wasm-unsafe-eval''. Either the 'unsafe-inline' keyword, a hash ('sha256-UwYTgd2DL2VSvb2lK6wO/b4I03bZjGCTyEkh5D7kH3c='), or a nonce ('nonce-...') is required to enable inline execution. The action has been blocked.",
    ]);
  });
});

test('a widget renders inside a sandboxed iframe', async () => {
  await withPage({ webgpu: false }, async ({ page }) => {
    await page.goto(`${server.origin}/host.html?view=pareto`);
    const frame = page.frameLocator('iframe');
    await frame.getByTestId('rack-pareto').locator('svg').waitFor({ timeout: 60_000 });
    // The frame's origin is opaque: no localStorage, and the widget did not need it.
    const storage = await page.frames()[1].evaluate(() => {
      try { return typeof window.localStorage.length; } catch (e) { return `throws ${e.name}`; }
    });
    assert.match(storage, /throws/);
    await screenshot(page, 'embed-sandboxed-iframe');
  });
});

test('the sandbox reads its settings from the URL, shares them, and embeds', async () => {
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/sandbox?v=1&prompt=Hello%20MoE%21&tokens=3&opt=none&format=int8&dispatch=fp8`);
    await page.getByTestId('generator').waitFor();
    assert.equal(await page.getByTestId('gen-prompt').inputValue(), 'Hello MoE!');
    assert.equal(await page.getByTestId('gen-tokens').inputValue(), '3');
    assert.equal(await page.getByTestId('opt-recorded_submission').isChecked(), false);
    assert.equal(await page.getByTestId('gen-format').inputValue(), 'int8');
    assert.equal(await page.getByTestId('gen-dispatch-fp8').isChecked(), true);
    assert.equal(await page.getByTestId('sandbox-warnings').count(), 0);
    await page.getByTestId('gen-share').click();
    const url = await page.getByTestId('gen-share-url').inputValue();
    assert.match(url, /#\/sandbox\?v=1&prompt=Hello%20MoE%21&tokens=3&opt=none&format=int8&dispatch=fp8$/);
    assert.match(await page.getByTestId('gen-embed-code').inputValue(), /#\/embed\/sandbox-mini\?v=1&/);

    await page.goto(`${server.base}#/sandbox?v=1&tokens=0&format=fp3&dispatch=fp4`);
    await page.getByTestId('sandbox-warnings').waitFor();
    assert.match(await page.getByTestId('sandbox-warnings').innerText(), /fp3/);
    assert.match(await page.getByTestId('sandbox-warnings').innerText(), /dispatch/);

    await page.goto(`${server.base}#/embed/sandbox-mini?v=1&prompt=Hi&opt=all&zzz=2`);
    await page.getByTestId('generator').waitFor();
    assert.match(await page.getByTestId('embed-warnings').innerText(), /zzz/);
    assert.equal(await page.getByTestId('gen-share').count(), 0);
    await page.getByTestId('gen-tokens').fill('2');
    await page.getByTestId('gen-run').click();
    await page.waitForFunction(() => document.querySelector('[data-testid=generator]')?.dataset.status === 'done', null, { timeout: 120_000 });
    await screenshot(page, 'embed-sandbox-mini');
    assertConsole(problems);
  });
});

// docs/EMBED.md's widget table: address and documented size of each widget.
async function documentedWidgets() {
  const { readFile } = await import('node:fs/promises');
  const doc = await readFile(new URL('../../docs/EMBED.md', import.meta.url), 'utf8');
  return [...doc.matchAll(/^\| [^|]+ \| `#\/embed\/([a-z-]+)\?…` \| [^|]+ \| (\d+) × (\d+) \|/gm)]
    .map(([, view, width, height]) => ({ view, width: Number(width), height: Number(height) }));
}

test('every widget in docs/EMBED.md renders alone at its size, light and dark', async () => {
  const widgets = await documentedWidgets();
  assert.equal(widgets.length, 6, JSON.stringify(widgets));
  await withPage({ webgpu: false }, async ({ page, problems }) => {
    for (const { view, width, height } of widgets) {
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        await page.setViewportSize({ width, height });
        await page.goto(`${server.base}#/embed/${view}`);
        await page.reload();
        const embed = page.locator(`[data-testid=embed][data-view=${view}]`);
        await embed.waitFor();
        assert.equal(await page.getByTestId('embed-warnings').count(), 0, view);
        assert.equal(await page.locator('.site-header').count(), 0, view);
        // Something of the widget itself, not only its frame.
        const part = { lab: 'lab-nvl72-story', 'sandbox-mini': 'generator', 'kernel-timeline': 'generator' }[view] ?? 'embed';
        await page.getByTestId(part).waitFor();
        if (!['lab', 'sandbox-mini', 'kernel-timeline'].includes(view)) {
          await embed.locator('svg, [data-testid=rack-summary]').first().waitFor();
        }
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `${view} (${colorScheme}) is ${overflow} px wider than ${width}`);
        await screenshot(page, `widget-${view}-${colorScheme}`);
      }
    }
    assertConsole(problems);
  });
});
