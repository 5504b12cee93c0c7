import fs from 'node:fs';
import path from 'node:path';
import { fullJoinToken, parseJoinToken } from '@llmgw/shared';
import { tokenFor } from '../api/tokens.js';
import { writeSecretFile } from '../store/modes.js';

/** Where the full join token is kept for the operator (and `llmgw-server join-token`). */
export function joinTokenFile(dataDir: string): string {
  return path.join(dataDir, 'join-token');
}

/**
 * The join secret (what agents send), from `LLMGW_JOIN_TOKEN` (a bare secret or a full
 * token) or the data directory, generated on first start; then `<data-dir>/join-token`
 * is (re)written, mode 0600, with the full token pinning `caPem`, so it is right also
 * when the secret came from the environment or the CA changed. Without a CA
 * (`--insecure-http`) the file holds the bare secret.
 */
export function prepareJoinToken(fromEnv: string | undefined, dataDir: string, caPem: string | undefined): { secret: string; file: string } {
  const { token } = tokenFor(fromEnv, dataDir, 'join-token');
  const secret = parseJoinToken(token).secret;
  const file = joinTokenFile(dataDir);
  writeSecretFile(file, `${renderJoinToken(secret, caPem)}\n`);
  return { secret, file };
}

/**
 * The token people and agents are given for `secret`: the full token pinning the admin
 * listener's CA, or the secret alone without TLS (`--insecure-http`). Used at start and
 * by `ctl join-token rotate`, so the file always says the same as ctl.
 */
export function renderJoinToken(secret: string, caPem: string | undefined): string {
  return caPem ? fullJoinToken(secret, caPem) : secret;
}

/** `llmgw-server join-token`: the token agents need, as the server last wrote it. */
export function readJoinToken(dataDir: string): string {
  const file = joinTokenFile(dataDir);
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    /* reported below */
  }
  if (!text) throw new Error(`no join token in ${file}: start llmgw-server once with --data-dir ${dataDir}, which writes it`);
  return text;
}
