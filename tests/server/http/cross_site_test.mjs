// Cross-site requests in a real browser (issue #40 F4): Debian's chromium driven by
// playwright-core against the real binary with no keys (the default).
//
//   node cross_site_test.mjs --source ROOT --binary build/src/app/mmserve
//
// 1. A page from another origin (another port) sends the requests that worked before: "no-cors"
//    POSTs with a text/plain body that unload `echo` and load a model `pwned`, and a read.
// 2. DNS rebinding: a page served as http://rebind.test:PORT/ (PORT: the server's own), whose
//    later requests reach the server with Host: rebind.test:PORT, as they do once the name
//    resolves to the server's address. Simulated with the name mapped to 127.0.0.2 (Chromium's
//    --host-resolver-rules), where the "attacker" serves the page at that port and relays
//    every other request, bytes unchanged, to the server on 127.0.0.1.
// Afterwards `echo` still serves, no `pwned` exists, and the server counted no load or unload.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const root = path.resolve(args.source || '.');
const binary = path.resolve(args.binary || path.join(root, 'build/src/app/mmserve'));
const require = createRequire(path.join(root, '.deps/node/package.json'));
const { chromium } = require('playwright-core');

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

const failures = [];
function check(ok, what) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what);
  if (!ok) failures.push(what);
}

// Runs in the attacking page: every request an attacker would try, and what the page saw.
async function attack(base) {
  const seen = {};
  const blind = (route, body) => fetch(base + route, {
    method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body,
  }).then((r) => 'sent (' + r.type + ')', (e) => 'failed: ' + e);
  seen.unload = await blind('/v2/repository/models/echo/unload', '{}');
  seen.load = await blind('/v2/repository/models/pwned/load',
    JSON.stringify({ parameters: { config: { backend: 'identity' } } }));
  // What a same-origin page (after rebinding) may send: JSON, read the answer.
  const json = (route, body) => fetch(base + route, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body,
  }).then(async (r) => r.status + ' ' + (await r.text()), (e) => 'failed: ' + e);
  seen.jsonUnload = await json('/v2/repository/models/echo/unload', '{}');
  seen.read = await fetch(base + '/v2/models/echo').then(async (r) => r.status + ' ' + (await r.text()),
    (e) => 'failed: ' + e);
  return seen;
}

async function get(base, route) {
  const res = await fetch(base + route);
  return { status: res.status, text: await res.text() };
}

async function main() {
  const port = await freePort();
  const base = 'http://127.0.0.1:' + port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mmserve-cross-site-'));
  fs.writeFileSync(path.join(dir, 'models.yaml'),
    'models:\n  - name: echo\n    backend: identity\n    params: {tensors: [{input: X, output: Y, datatype: FP32}]}\n');
  const log = path.join(dir, 'server.log');
  const server = spawn(binary, ['serve', path.join(dir, 'models.yaml'), '--port', String(port),
    '--grpc-port', '-1', '--lock-dir', path.join(dir, 'locks')],
  { stdio: ['ignore', fs.openSync(log, 'w'), fs.openSync(log, 'a')] });
  // The attacker's site, on another port: one empty page.
  const site = http.createServer((req, res) => res.end('<html><body>cat pictures</body></html>'));
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const sitePort = site.address().port;
  const rebinder = http.createServer((req, res) => {
    if (req.url === '/') return res.end('<html><body>cat pictures</body></html>');
    const relay = http.request({ host: '127.0.0.1', port, method: req.method, path: req.url,
      headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    relay.on('error', () => res.destroy());
    req.pipe(relay);
  });
  await new Promise((r) => rebinder.listen(port, '127.0.0.2', r));
  let browser;
  try {
    for (let i = 0; ; i++) {
      try { if ((await get(base, '/v2/health/ready')).status === 200) break; } catch (e) { /* starting */ }
      if (i > 300 || server.exitCode !== null) throw new Error('mmserve did not start: ' + fs.readFileSync(log));
      await sleep(200);
    }
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--host-resolver-rules=MAP rebind.test 127.0.0.2'] });
    const page = await browser.newPage();

    // 1. Another origin.
    await page.goto('http://127.0.0.1:' + sitePort + '/');
    const cross = await page.evaluate(attack, base);
    console.log('cross-origin page saw: ' + JSON.stringify(cross));
    check(!cross.read.startsWith('200'), 'a cross-origin page cannot read a model: ' + cross.read);

    // 2. DNS rebinding: the page is the attacker's, every later request goes to the server.
    await page.goto('http://rebind.test:' + port + '/');
    const rebind = await page.evaluate(attack, '');
    console.log('rebinding page saw: ' + JSON.stringify(rebind));
    check(rebind.read.startsWith('403') && rebind.read.includes('allowed_hosts'),
      'a rebinding page reads 403 naming global.allowed_hosts: ' + rebind.read.slice(0, 120));
    check(rebind.jsonUnload.startsWith('403'), 'its JSON unload is refused: ' + rebind.jsonUnload.slice(0, 60));

    // The server did none of it.
    const echo = await get(base, '/v2/models/echo/ready');
    check(echo.status === 200, 'echo is still ready: ' + echo.status);
    const pwned = await get(base, '/v2/models/pwned');
    check(pwned.status === 404, 'no model pwned exists: ' + pwned.status + ' ' + pwned.text);
    const events = await get(base, '/v2/events');
    const kinds = JSON.parse(events.text).events.map((e) => e.kind + ' ' + e.model);
    check(!kinds.some((k) => k.startsWith('unload') || k.includes('pwned')),
      'no unload or load happened: ' + JSON.stringify(kinds));
    // The status page, same-origin, still works: its POSTs carry Origin = its own.
    const own = await page.goto(base + '/').then(() => page.evaluate(() => fetch('/v2/repository/index', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' }).then((r) => r.status)));
    check(own === 200, 'a same-origin POST from the status page is answered: ' + own);
  } finally {
    if (browser) await browser.close();
    site.close();
    rebinder.close();
    server.kill('SIGTERM');
    await new Promise((r) => (server.exitCode !== null ? r() : server.on('exit', r)));
  }
  if (failures.length) {
    console.log(fs.readFileSync(log, 'utf8').split('\n').slice(-30).join('\n'));
    console.log(`cross-site: ${failures.length} failed`);
    process.exit(1);
  }
  console.log('cross-site: all checks passed');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
