/**
 * Test helpers shared by the agent's tests (imported by tests only, never bundled).
 */

/** Polls `fn` every 25 ms until it returns something truthy; fails after `ms` naming `what`. */
export async function waitFor<T>(what: string, fn: () => T | undefined | false, ms = 8000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
