// The labs as a student uses them: predict, run, read the check and the explanation; the rack lab
// anywhere (wasm), the kernel-fusion lab on WebGPU, and a clear message without WebGPU.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { serveDist, withPage, launch, openPage, screenshot, assertConsole } from './harness.mjs';

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
    assert.match(await r.innerText(), /tokens\/s per user \(model: an estimate, off by a median of ±\d+% \(at most ±\d+%\) on \d+ public measurements of its regime, high concurrency \(4 or more sequences per GPU\), it was not fitted to\)/);
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
    assert.match(await r.innerText(), /^140 kernels \(counted by the sandbox as it ran on your GPU\)/);
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
    assert.match(await r.innerText(), /^1\.0\d nats per byte \(measured: the deepseek-mini training runs on an H200 \(train\/results\/fp8-training\.json\), recorded, not run in your browser\)/);
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

/** Each lab in the menu, as [id, steps]. */
async function labsInMenu(page) {
  const ids = await page.locator('[data-testid^=lab-open-]').evaluateAll(
    (bs) => bs.map((b) => b.dataset.testid.slice('lab-open-'.length)));
  const out = [];
  for (const id of ids) {
    await page.getByTestId(`lab-open-${id}`).click();
    await page.getByTestId(`lab-${id}`).waitFor();
    out.push([id, await page.locator('.lab-step').count()]);
  }
  return out;
}

test('every lab runs start to finish; progress survives a reload, exports and imports', async () => {
  await withPage({ webgpu: true }, async ({ page, problems }) => {
    await page.goto(`${server.base}#/labs`);
    await page.getByTestId('lab-nvl72-story').waitFor();
    const labs = await labsInMenu(page);
    assert.ok(labs.length >= 12, JSON.stringify(labs));
    let steps = 0;
    for (const [id, count] of labs) {
      await page.getByTestId(`lab-open-${id}`).click();
      await page.getByTestId(`lab-${id}`).waitFor();
      for (let i = 0; i < count; i++) {
        const r = await predictAndRun(page, i, 1);
        // Every run gives a number with its unit and a verdict, never an error.
        assert.match(await r.innerText(), /^-?[\d.,]+ .*(spot on|off by|side)/, `${id} step ${i + 1}`);
        await page.getByTestId(`lab-explain-${i}`).waitFor();
        steps++;
      }
      assert.match(await page.getByTestId(`lab-open-${id}`).innerText(), new RegExp(`\\(${count}/${count}\\)`));
      if (id === 'speculative-decoding') await screenshot(page, 'labs-in-progress');
    }
    assert.match(await page.getByTestId('lab-progress').innerText(), new RegExp(`${steps} steps answered`));

    // A reload keeps every answer: the prediction, the value and the verdict. (The address now
    // names the last lab opened.)
    await page.reload();
    await page.getByTestId(`lab-${labs[labs.length - 1][0]}`).waitFor();
    await page.getByTestId('lab-open-nvl72-story').click();
    await page.getByTestId('lab-nvl72-story').waitFor();
    assert.equal(await page.getByTestId('lab-predict-0').inputValue(), '1');
    assert.match(await page.getByTestId('lab-result-0').innerText(), /tokens\/s per user/);
    for (const [id, count] of labs) {
      assert.match(await page.getByTestId(`lab-open-${id}`).innerText(), new RegExp(`\\(${count}/${count}\\)`), id);
    }

    // The teacher view shows every step's answer (a fixed one, or why there is none).
    for (const [id, count] of labs) {
      await page.getByTestId('labs-view-student').click();
      await page.getByTestId(`lab-open-${id}`).click();
      await page.getByTestId('labs-view-teacher').click();
      await page.getByTestId(`lab-teacher-${id}`).waitFor();
      for (let i = 0; i < count; i++) {
        const answer = await page.getByTestId(`teacher-answer-${i}`).innerText();
        assert.match(answer, /^Answer: (-?[\d.,]+ .*\((model|measured)|measured on each student's GPU)/, `${id} ${i + 1}: ${answer}`);
        assert.doesNotMatch(answer, /could not be computed/);
        assert.match(await page.getByTestId(`teacher-student-${i}`).innerText(), /^Student: 1 /);
      }
      if (id === 'disaggregation') await screenshot(page, 'labs-teacher');
    }
    await page.getByTestId('labs-view-summary').click();
    await page.getByTestId('lab-summary').waitFor();
    assert.match(await page.getByTestId('summary-nvl72-story').innerText(), /4 of 4 steps answered/);
    await screenshot(page, 'labs-summary');

    // Export: a name, then the file a student hands in.
    await page.getByTestId('labs-view-student').click();
    await page.getByTestId('lab-progress').locator('summary').click();
    await page.getByTestId('lab-student').fill('Ada Lovelace');
    await page.getByTestId('lab-student').dispatchEvent('change');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('lab-export').click()]);
    const file = await download.path();
    const exported = JSON.parse(await readFile(file, 'utf8'));
    assert.equal(exported.student, 'Ada Lovelace');
    assert.equal(Object.values(exported.labs).reduce((n, l) => n + Object.keys(l).length, 0), steps);
    assertConsole(problems);

    // A teacher's browser, with nothing saved, imports it: the same answers, and a file that is
    // not a progress file is refused with the reason, keeping what was imported.
    const browser = await launch({ webgpu: false });
    try {
      const { page: teacher, problems: teacherProblems } = await openPage(browser);
      await teacher.goto(`${server.base}#/labs?v=1&lab=nvl72-story&view=teacher`);
      await teacher.getByTestId('lab-teacher-nvl72-story').waitFor();
      assert.equal(await teacher.getByTestId('teacher-student-0').count(), 0);
      await teacher.getByTestId('lab-progress').locator('summary').click();
      await teacher.getByTestId('lab-import').setInputFiles(file);
      assert.match(await teacher.getByTestId('lab-import-result').innerText(), new RegExp(`Imported ${steps} answers`));
      assert.match(await teacher.getByTestId('teacher-student-0').innerText(), /^Ada Lovelace: 1 /);
      for (const [id, count] of labs) {
        assert.match(await teacher.getByTestId(`lab-open-${id}`).innerText(), new RegExp(`\\(${count}/${count}\\)`), id);
      }
      await teacher.getByTestId('lab-import').setInputFiles({ name: 'notes.json', mimeType: 'application/json', buffer: Buffer.from('{"version": 7, "labs": {}}') });
      await teacher.getByTestId('lab-import-result').filter({ hasText: 'Not imported' }).waitFor();
      assert.match(await teacher.getByTestId('lab-import-result').innerText(), /Not imported: progress file version 7: this page reads version 1/);
      assert.match(await teacher.getByTestId('teacher-student-0').innerText(), /^Ada Lovelace/);
      assertConsole(teacherProblems);
    } finally {
      await browser.close();
    }
  });
});
