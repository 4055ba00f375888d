// The status page in a real browser: Debian's chromium driven by playwright-core (installed by
// scripts/test.sh into .deps/node), against the real binary serving the demo's models with an
// API key and an admin key.
//
//   node status_page_test.mjs --source ROOT --binary build/src/app/mmserve [--screenshot FILE]
//
// Checks: the page asks for the API key before it calls anything; with it, it lists every demo
// model READY, the memory bar and the events; a model's request rate and p50 appear once it has
// served requests, and a page opened after the traffic shows the server's last minute (rate,
// p50, errors, a generator's tokens/s, the keep-alive countdown); the load/unload buttons appear only with the admin key; an unload through
// the API shows within 2 s; the Load button loads the model again; no console errors.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const root = path.resolve(args.source || '.');
const binary = path.resolve(args.binary || path.join(root, 'build/src/app/mmserve'));
const require = createRequire(path.join(root, '.deps/node/package.json'));
const { chromium } = require('playwright-core');

const API_KEY = 'status-page-api-key';
const ADMIN_KEY = 'status-page-admin-key';
const DEMO_MODELS = ['embedder', 'reranker', 'llm', 'detector', 'classifier', 'echo', 'echo_slow'];

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(base, method, route, key, body) {
  const headers = key ? { Authorization: 'Bearer ' + key } : {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + route, { method, headers, body });
  return { status: res.status, text: await res.text() };
}

async function waitReady(base, server) {
  for (let i = 0; i < 300; i++) {
    if (server.exitCode !== null) throw new Error('mmserve exited with ' + server.exitCode);
    try {
      if ((await fetch(base + '/v2/health/ready')).status === 200) return;
    } catch (e) { /* not listening yet */ }
    await sleep(200);
  }
  throw new Error('mmserve was not ready in 60 s');
}

const failures = [];
function check(ok, what) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what);
  if (!ok) failures.push(what);
}

async function main() {
  const port = await freePort();
  const base = 'http://127.0.0.1:' + port;
  const log = path.join(os.tmpdir(), 'mmserve-status-page-' + port + '.log');
  const server = spawn(binary, ['serve', path.join(root, 'examples/demo.yaml'), '--port', String(port),
    '--grpc-port', '-1'], {
    env: Object.assign({}, process.env, { MMSERVE_API_KEY: API_KEY, MMSERVE_ADMIN_KEY: ADMIN_KEY }),
    stdio: ['ignore', fs.openSync(log, 'w'), fs.openSync(log, 'a')],
  });
  let browser;
  try {
    await waitReady(base, server);
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'] });
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));

    // The page is open; the data behind it is not.
    check((await call(base, 'GET', '/v2/models/stats')).status === 401, 'the statistics need the API key');
    const bad = await call(base, 'GET', '/v2/events?after=x', API_KEY);
    check(bad.status === 400 && bad.text.includes("'after'"), 'a bad ?after= is a 400 that names it');
    await page.goto(base + '/');
    await page.getByText('This server needs an API key').waitFor({ timeout: 5000 });
    check(await page.locator('#api-key').isVisible(), 'the page asks for the API key');
    check(await page.locator('#models tbody tr').count() === 0, 'no model is listed before the key');

    await page.fill('#api-key', API_KEY);
    await page.click('#keys-save');
    for (const name of DEMO_MODELS) {
      const row = page.locator(`#models tr[data-model="${name}/1"]`);
      await row.locator('td[data-col=state]', { hasText: 'READY' }).waitFor({ timeout: 10000 });
    }
    check(true, 'every demo model is listed READY: ' + DEMO_MODELS.join(', '));
    check(await page.locator('#models button[data-action]:visible').count() === 0,
      'no load/unload buttons without the admin key');
    const device = await page.locator('#devices .device').first().textContent();
    check(/host: .* of the .* budget/.test(device), 'the memory budget is drawn: ' + device);
    check(await page.locator('#devices .bar span').count() === DEMO_MODELS.length,
      'one segment of the bar per loaded model');
    check(await page.locator('#events li', { hasText: 'loaded' }).count() >= DEMO_MODELS.length,
      'the start-up loads are listed as events');

    // Requests make a rate and latency quantiles over the last minute.
    const echo = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
    for (let i = 0; i < 20; i++) {
      const r = await call(base, 'POST', '/v2/models/echo/infer', API_KEY, echo);
      if (r.status !== 200) throw new Error('echo: ' + r.status + ' ' + r.text);
    }
    const echoRow = page.locator('#models tr[data-model="echo/1"]');
    await page.waitForFunction(() => {
      const row = document.querySelector('#models tr[data-model="echo/1"]');
      return row && /ms$/.test(row.querySelector('td[data-col=p50]').textContent) &&
        parseFloat(row.querySelector('td[data-col=rate]').textContent) > 0;
    }, null, { timeout: 5000 });
    check(true, 'echo shows a rate and p50 ' + await echoRow.locator('td[data-col=p50]').textContent() +
      ', p99 ' + await echoRow.locator('td[data-col=p99]').textContent());

    // The last minute is the server's: a page opened after the traffic shows it at once, with
    // errors, a generator's tokens/s and the keep-alive countdown.
    const gen = await call(base, 'POST', '/v1/completions', API_KEY,
      JSON.stringify({ model: 'llm', prompt: 'Hello', max_tokens: 8 }));
    if (gen.status !== 200) throw new Error('llm: ' + gen.status + ' ' + gen.text);
    const fresh = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    fresh.on('pageerror', (e) => errors.push(String(e)));
    await fresh.goto(base + '/');
    await fresh.fill('#api-key', API_KEY);
    await fresh.click('#keys-save');
    await fresh.waitForFunction(() => {
      const cell = (model, col) => {
        const row = document.querySelector(`#models tr[data-model="${model}/1"]`);
        return row ? row.querySelector(`td[data-col=${col}]`).textContent : '';
      };
      return parseFloat(cell('echo', 'rate')) > 0 && /ms$/.test(cell('echo', 'p50')) &&
        parseFloat(cell('llm', 'tokens')) > 0;
    }, null, { timeout: 5000 });
    const cellOf = (model, col) =>
      fresh.locator(`#models tr[data-model="${model}/1"] td[data-col=${col}]`).textContent();
    check(true, 'a page opened after the traffic shows echo at ' + await cellOf('echo', 'rate') +
      ' req/s, p50 ' + await cellOf('echo', 'p50') + ', and llm at ' + await cellOf('llm', 'tokens') +
      ' tokens/s');
    check(await cellOf('echo', 'errors') === '0', 'echo had no errors in the last minute');
    const unloads = await cellOf('echo', 'unloads');
    check(/^(never|\d+[hms]( \d+[ms])?)$/.test(unloads), 'the keep-alive countdown: ' + unloads);
    await fresh.close();

    await page.fill('#admin-key', ADMIN_KEY);
    await page.click('#keys-save');
    await page.locator('#models button[data-action]:visible').first().waitFor({ timeout: 5000 });
    check(await page.locator('#models button[data-action]:visible').count() === DEMO_MODELS.length,
      'with the admin key every model has a load/unload button');

    // An unload through the API shows within 2 s.
    const unload = await call(base, 'POST', '/v2/repository/models/reranker/unload', ADMIN_KEY, '{}');
    check(unload.status === 200, 'the API unloads reranker: ' + unload.status + ' ' + unload.text);
    const since = Date.now();
    const reranker = page.locator('#models tr[data-model="reranker/1"]');
    await reranker.locator('td[data-col=state]', { hasText: 'UNAVAILABLE' }).waitFor({ timeout: 2000 });
    check(true, `the unload showed after ${Date.now() - since} ms`);
    await page.locator('#events li', { hasText: 'unloaded through the repository API' }).waitFor({ timeout: 2000 });
    check(true, 'the unload is listed as an event');

    // The Load button loads it again.
    await reranker.locator('button[data-action=load]').click();
    await reranker.locator('td[data-col=state]', { hasText: 'READY' }).waitFor({ timeout: 20000 });
    const ready = await call(base, 'GET', '/v2/models/reranker/ready', API_KEY);
    check(ready.status === 200, 'the Load button loaded reranker (ready: ' + ready.status + ')');
    await reranker.locator('button[data-action=unload]').waitFor({ timeout: 2000 });

    if (args.screenshot) {
      await page.screenshot({ path: args.screenshot, fullPage: true });
      console.log('screenshot: ' + args.screenshot);
    }
    check(errors.length === 0, 'no console errors' + (errors.length ? ': ' + errors.join(' | ') : ''));
  } catch (e) {
    failures.push(String(e && e.stack || e));
    console.log('FAIL ' + (e && e.stack || e));
    console.log('server log (' + log + '):\n' + fs.readFileSync(log, 'utf8').split('\n').slice(-30).join('\n'));
  } finally {
    if (browser) await browser.close();
    server.kill('SIGTERM');
  }
  console.log(failures.length ? `status page: ${failures.length} failed` : 'status page: all passed');
  process.exit(failures.length ? 1 : 0);
}

main();
