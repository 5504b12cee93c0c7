// Silent connections (issue 28): 1,100 TCP connections to the TLS admin listener that never
// start the handshake, against a server with `--headers-timeout 2`; prints how long each
// stayed open from its connect. Before the handshake was bounded by --headers-timeout they
// held their slots for Node's 120 s handshake timeout (the baseline, from the issue).
// Goal: every one closed within the headers timeout (plus the check's slack). Needs
// `ulimit -n` above 1,100.
import net from 'node:net';
import { startServer, stopAll, tmp } from './lib.mjs';

const N = 1100;
const HEADERS_S = 2;
try {
  const s = await startServer({ dir: tmp('llmgw-silent-'), extraArgs: ['--headers-timeout', String(HEADERS_S)] });
  const url = new URL(s.adminUrl);
  const open = Array.from(
    { length: N },
    () =>
      new Promise((resolve) => {
        const c = net.connect(Number(url.port), url.hostname);
        let at = Date.now();
        c.on('connect', () => (at = Date.now()));
        c.on('error', () => undefined);
        c.on('close', () => resolve(Date.now() - at));
      }),
  );
  const ms = (await Promise.all(open)).sort((a, b) => a - b);
  console.log(
    `${N} silent TCP connections to the TLS admin listener, --headers-timeout ${HEADERS_S}: open for min ${ms[0]} ms, median ${ms[N >> 1]} ms, max ${ms.at(-1)} ms after connecting (baseline: 120,000 ms, Node's handshake timeout)`,
  );
} finally {
  stopAll();
}
process.exit(0);
