// What "running" means before the banner says so: both listeners answer and the quick
// start's model (`tiny`) has a ready replica; models added to the catalog are not waited for.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The addresses the server really listens on, from its "llmgw-server listening" log line
 * (written after `sinceByte`), so `:0` works too. Undefined until it has logged it.
 */
export function listening(log, sinceByte) {
  let text;
  try {
    text = fs.readFileSync(log, 'utf8').slice(sinceByte);
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    if (!line.includes('llmgw-server listening')) continue;
    try {
      const rec = JSON.parse(line);
      return { admin: rec.admin, client: rec.client };
    } catch {
      // A torn line; the next read has it whole.
    }
  }
  return undefined;
}

/** GET url; resolves with { status, body } or undefined when nothing answers. */
export function get(url, { ca, token } = {}) {
  return new Promise((resolve) => {
    const lib = url.startsWith('https:') ? https : http;
    const req = lib.get(url, { ...(ca ? { ca } : {}), timeout: 2000, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', () => resolve(undefined));
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
  });
}

/**
 * The models that should have a replica (scaling.min >= 1) and have none that answers
 * (of `names` only, when given), each with the placement summary when the server has one,
 * else its replicas' states; [] when all are ready, undefined
 * when the admin API does not answer. "Ready" is checked at the engine itself (its
 * `/v1/models`, with its key): right after a restart the store still says `ready` for
 * the replicas of the last run until the agent reports.
 */
export async function unreadyModels(adminUrl, ca, token, names) {
  const [m, r] = await Promise.all([get(`${adminUrl}/api/v1/models`, { ca, token }), get(`${adminUrl}/api/v1/replicas?show_keys=true`, { ca, token })]);
  if (m?.status !== 200 || r?.status !== 200) return undefined;
  let models;
  let replicas;
  try {
    models = JSON.parse(m.body);
    replicas = JSON.parse(r.body);
  } catch {
    return undefined;
  }
  const answering = new Set();
  await Promise.all(
    replicas
      .filter((x) => x.state === 'ready' && x.endpoint)
      .map(async (x) => {
        const res = await get(`${x.endpoint}/v1/models`, { token: x.api_key });
        if (res?.status === 200) answering.add(x.model);
      }),
  );
  return models
    .filter((x) => x.min_replicas >= 1 && !answering.has(x.name) && (names === undefined || names.includes(x.name)))
    .map((x) => {
      const states = replicas.filter((r) => r.model === x.name).map((r) => r.state);
      const summary = x.placement_summary ?? (states.length > 0 ? `replica ${states.join(', ')}` : 'no replica yet');
      return { name: x.name, summary };
    });
}
