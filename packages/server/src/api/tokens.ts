import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
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

const BEARER = /^Bearer\s+(.+)$/i;

/** The credential of an `Authorization: Bearer <token>` header, on any listener. */
export function bearerToken(authorization: string | undefined): string | undefined {
  const m = authorization ? BEARER.exec(authorization) : null;
  return m?.[1]?.trim();
}

/** Compares secrets in constant time; hashing first makes the lengths equal. */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
