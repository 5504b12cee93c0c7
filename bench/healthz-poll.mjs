// Asks `/healthz` at URL one request after another (20 ms apart) until its stdin closes,
// then prints `[startedAtMs, latencyMs]` pairs as JSON (epoch ms): a process of its own, so that what it measures
// is the server's delay, not that of a load generator's busy event loop beside it.
// Usage: node bench/healthz-poll.mjs URL [CA_FILE]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const undici = createRequire(path.join(root, 'packages/server/package.json'))('undici');
const [url, ca] = process.argv.slice(2);
const dispatcher = new undici.Agent(ca ? { connect: { ca: fs.readFileSync(ca, 'utf8') } } : {});
let stop = false;
process.stdin.on('end', () => (stop = true));
process.stdin.resume();
const ms = [];
while (!stop) {
  const at = Date.now();
  const t = performance.now();
  const res = await undici.request(url, { dispatcher });
  await res.body.text();
  ms.push([at, performance.now() - t]);
  await new Promise((r) => setTimeout(r, 20));
}
process.stdout.write(JSON.stringify(ms));
process.exit(0);
