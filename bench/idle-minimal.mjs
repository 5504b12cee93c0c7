// The least any Node HTTPS server spends on idle-agents.mjs's traffic, for idle.bench.mjs:
// the same agent API paths over TLS (the llmgw server's own certificate, from its data
// directory, so the agents trust it as they trust that server) with nothing behind them.
// A join gets a credential, a heartbeat's body is parsed and answered with its node id,
// and an assignments long-poll is answered at once the first time and after 25 s after.
// Prints its URL.
//
//   node bench/idle-minimal.mjs SERVER_DATA_DIR
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';

const tls = path.join(process.argv[2], 'tls');
const json = (res, body) => {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
};
const server = https.createServer(
  { key: fs.readFileSync(path.join(tls, 'server-key.pem')), cert: fs.readFileSync(path.join(tls, 'server.pem')), keepAliveTimeout: 65_000 },
  (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = new URL(req.url, 'https://x');
      if (url.pathname === '/agent/v1/join') return json(res, { credential: `c-${JSON.parse(body).node_id}` });
      if (url.pathname === '/agent/v1/heartbeat') return json(res, { node_id: JSON.parse(body).report.node_id });
      const m = url.pathname.match(/^\/agent\/v1\/nodes\/([^/]+)\/assignments$/);
      if (!m) return res.writeHead(404).end();
      const reply = () => json(res, { node_id: m[1], version: 1, assignments: [] });
      if (url.searchParams.get('after') === '-1') return reply();
      const t = setTimeout(reply, Number(url.searchParams.get('wait_ms') ?? 25_000));
      res.on('close', () => clearTimeout(t));
    });
  },
);
server.listen(0, '127.0.0.1', () => console.log(`https://127.0.0.1:${server.address().port}`));
// An exit rather than death by the signal, so that `--cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));
