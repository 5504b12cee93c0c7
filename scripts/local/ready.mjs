// What "running" means before the banner says so: both listeners answer and every model
// the catalog wants running has a ready replica.
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
 * The models that should have a replica (scaling.min >= 1) and have none ready, with the
 * placement summary when the server has one; [] when all are ready, undefined when the
 * admin API does not answer.
 */
export async function unreadyModels(adminUrl, ca, token) {
  const r = await get(`${adminUrl}/api/v1/models`, { ca, token });
  if (r?.status !== 200) return undefined;
  try {
    const models = JSON.parse(r.body);
    return models
      .filter((m) => m.min_replicas >= 1 && m.ready_replicas < 1)
      .map((m) => ({ name: m.name, ...(m.placement_summary ? { summary: m.placement_summary } : {}) }));
  } catch {
    return undefined;
  }
}
