import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Returns the token from the environment, or the one kept in `<dataDir>/<name>`,
 * generating it on first start (like k3s's node-token): a fresh install is never
 * left open, and the operator finds the secret in one known place.
 */
export function tokenFor(fromEnv: string | undefined, dataDir: string, name: string): { token: string; file?: string } {
  if (fromEnv) return { token: fromEnv };
  const file = path.join(dataDir, name);
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (existing) return { token: existing, file };
  } catch {
    /* first start */
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const token = `llmgw-${name.replace(/-token$/, '')}-${randomBytes(24).toString('base64url')}`;
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, file };
}
