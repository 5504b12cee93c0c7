// The baseline for the gateway benchmark: the least a Node proxy can do (read the body,
// JSON.parse it, forward over a keep-alive undici pool, pass the answer back). Run on
// the same core as the gateway, it shows what llmgw's own features cost on this machine.
import http from 'node:http';
import { Pool } from './lib.mjs';

const [upstream, key] = process.argv.slice(2);
const pool = new Pool(upstream, { connections: 256 });
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  JSON.parse(body.toString('utf8'));
  const up = await pool.request({ path: req.url, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body });
  if (String(up.headers['content-type']).startsWith('text/event-stream')) {
    res.writeHead(up.statusCode, { 'content-type': 'text/event-stream' });
    for await (const chunk of up.body) res.write(chunk);
    res.end();
    return;
  }
  const buf = Buffer.from(await up.body.arrayBuffer());
  res.writeHead(up.statusCode, { 'content-type': 'application/json', 'content-length': buf.length });
  res.end(buf);
});
server.listen(0, '127.0.0.1', () => console.log(`minimal proxy on http://127.0.0.1:${server.address().port}`));
