/**
 * Several addresses of one control plane (`--server https://a:8081,https://b:8081`): the
 * agent and ctl talk to one instance at a time and move to the next when it is not there
 * or not well. Pure: the callers classify their HTTP client's errors with the code sets
 * below and do the I/O; this file only says what to try next.
 */

/**
 * Error codes that mean "that instance is not there (or not well)": nothing listens, the
 * connection broke or timed out, the peer went away during the TLS handshake (Node reports
 * that as ECONNRESET), its name does not resolve (an instance removed from DNS). A TLS
 * verification failure is not among them: all instances share one CA, so another
 * instance would fail the same way, and the operator must see it.
 */
export const INSTANCE_DOWN_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Answers of a proxy or an instance that cannot serve now: another instance may. */
export const INSTANCE_DOWN_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/** Whether a failure (an error code, or an HTTP status) means "try another instance". */
export function instanceDown(f: { code?: string | undefined; status?: number | undefined }): boolean {
  return f.status !== undefined ? INSTANCE_DOWN_STATUSES.has(f.status) : f.code !== undefined && INSTANCE_DOWN_CODES.has(f.code);
}

/**
 * The addresses in a `--server` value: comma-separated, each trimmed and without trailing
 * slashes; empty entries (a trailing comma) are dropped and a repeated address counts
 * once. Each address is the caller's to validate (the agent and ctl word it differently).
 */
export function splitServerList(text: string): string[] {
  const out: string[] = [];
  for (const part of text.split(',')) {
    const url = part.trim().replace(/\/+$/, '');
    if (url && !out.includes(url)) out.push(url);
  }
  return out;
}

/**
 * Which address to use now. Sticky: the one that last worked stays current until it
 * fails, so a dead first address costs one failure, not one per request. Requests in
 * flight at once (the agent's heartbeat and long-poll) may both see the same instance
 * fail: only the first moves the rotation on, the second follows it.
 */
export class ServerRotation {
  readonly urls: readonly string[];
  private index = 0;

  constructor(urls: readonly string[]) {
    if (urls.length === 0) throw new Error('no server address');
    this.urls = [...urls];
  }

  get current(): string {
    return this.urls[this.index]!;
  }

  /**
   * `url` failed as an instance that is down: the address to try next — the one after
   * `url` when it was still current, else the one another request already moved to.
   * Undefined with a single address.
   */
  next(url: string): string | undefined {
    if (this.urls.length < 2) return undefined;
    if (this.current === url) this.index = (this.index + 1) % this.urls.length;
    return this.current;
  }
}

/** Told when a request leaves `from` for `to` because of `err`. */
export type OnMove = (from: string, to: string, err: unknown) => void;

/**
 * Runs `attempt` against the current address and, while it fails in a way `retryable`
 * accepts, against the next ones: each address is tried at most once per call. The last
 * failure is thrown as it was; one that `retryable` refuses is thrown at once. A request
 * is retryable only when it is safe to repeat: the caller decides (a GET always, a write
 * only when it was never sent).
 */
export async function withFailover<T>(
  rotation: ServerRotation,
  attempt: (url: string) => Promise<T>,
  retryable: (err: unknown) => boolean,
  onMove?: OnMove,
): Promise<T> {
  let url = rotation.current;
  for (let tries = 1; ; tries++) {
    try {
      return await attempt(url);
    } catch (err) {
      if (tries >= rotation.urls.length || !retryable(err)) throw err;
      const before = rotation.current;
      const to = rotation.next(url);
      if (to === undefined) throw err;
      if (rotation.current !== before) onMove?.(url, to, err);
      url = to;
    }
  }
}
