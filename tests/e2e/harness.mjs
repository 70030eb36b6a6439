// Shared by the browser tests: a static server for dist/ under a sub-path (proving the site's
// URLs are relative), and Debian's Chromium with or without WebGPU.
import { createServer } from 'node:http';
import { readFile, mkdir } from 'node:fs/promises';
import { extname, join, normalize, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const dist = join(here, '..', '..', 'dist');
export const outputDir = join(here, 'output');
export const subPath = '/some/blog/moescope/';

const mime = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.json': 'application/json', '.png': 'image/png', '.svg': 'image/svg+xml',
};

/** `overrides` maps a file of dist/ to the bytes served in its place (with status 200). */
export async function serveDist({ overrides = {} } = {}) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://localhost');
    // A blog page that embeds a widget in a sandboxed iframe (no allow-same-origin): the frame's
    // origin is opaque, so every request it makes is cross-origin.
    if (url.pathname === '/host.html') {
      const src = `${subPath}#/embed/${url.searchParams.get('view') ?? 'rack-summary'}?v=1`;
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(
        `<!doctype html><title>a blog</title><p>A post.</p>` +
        `<iframe sandbox="allow-scripts" src="${src}" width="720" height="600" title="MoEscope"></iframe>`);
      return;
    }
    if (!url.pathname.startsWith(subPath)) { res.writeHead(404).end('outside the sub-path'); return; }
    let rel = normalize(decodeURIComponent(url.pathname.slice(subPath.length)) || 'index.html');
    if (rel.startsWith('..')) { res.writeHead(403).end(); return; }
    try {
      const body = overrides[rel] ?? await readFile(join(dist, rel));
      // Static hosts such as GitHub Pages send this header; a sandboxed embed needs it to load
      // its own module script and wasm.
      res.writeHead(200, {
        'Content-Type': mime[extname(rel)] ?? 'application/octet-stream',
        'Access-Control-Allow-Origin': '*',
      }).end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const base = `${origin}${subPath}`;
  return { base, origin, close: () => new Promise((resolve) => server.close(resolve)) };
}

const commonFlags = [
  '--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** Chromium with SwiftShader's WebGPU adapter (webgpu = true) or with WebGPU off. */
export async function launch({ webgpu }) {
  const args = webgpu
    ? [...commonFlags, '--enable-unsafe-webgpu', '--enable-webgpu-developer-features']
    : [...commonFlags, '--disable-gpu', '--disable-features=WebGPU'];
  return chromium.launch({ executablePath: '/usr/bin/chromium', args });
}

/** A page that records console errors, CSP violations and uncaught exceptions. */
export async function openPage(browser, viewport = { width: 1280, height: 900 }) {
  const page = await browser.newPage({ viewport });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy|panicked/.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  return { page, problems };
}

export async function screenshot(page, name) {
  await mkdir(outputDir, { recursive: true });
  await page.screenshot({ path: join(outputDir, `${name}.png`), fullPage: true });
}

/** Runs `body({ page, problems })` in a fresh browser that is always closed afterwards. */
export async function withPage({ webgpu }, body) {
  const browser = await launch({ webgpu });
  try {
    return await body(await openPage(browser));
  } finally {
    await browser.close();
  }
}

/**
 * The page's console errors are exactly `expected`: each message in it appeared (an expectation
 * that can fail both ways), and nothing else did. Messages are compared whole, so a panic can
 * never hide behind a message that shares a word with an expected one.
 */
export function assertConsole(problems, expected = []) {
  const unexpected = problems.filter((p) => !expected.includes(p));
  const missing = expected.filter((e) => !problems.includes(e));
  if (unexpected.length || missing.length) {
    throw new Error(`console: unexpected ${JSON.stringify(unexpected)}; missing ${JSON.stringify(missing)}`);
  }
}
