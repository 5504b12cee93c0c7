/**
 * Boolean environment variables, read one way everywhere (server, agent, ctl).
 *
 * Why not commander's `.env()` on a flag without a value: commander sets such a flag
 * whenever its variable is defined, so `LLMGW_INSECURE_HTTP=0` turned plain HTTP on.
 * Here `1/true/yes/on` mean on, `0/false/no/off` (and empty) mean off, in any case, and
 * anything else is an error naming the variable, so a typo never picks a side.
 */
export function parseSwitch(name: string, value: string | undefined): boolean {
  const v = (value ?? '').trim().toLowerCase();
  if (ON.has(v)) return true;
  if (OFF.has(v)) return false;
  throw new Error(`invalid ${name}="${value}": want 1, true, yes or on to turn it on, 0, false, no or off to turn it off`);
}

/** A switch that is a flag and an environment variable: on when the flag is given, else as the variable says. */
export function flagOrEnv(flag: boolean | undefined, name: string, env: Record<string, string | undefined>): boolean {
  return flag === true || parseSwitch(name, env[name]);
}

const ON: ReadonlySet<string> = new Set(['1', 'true', 'yes', 'on']);
const OFF: ReadonlySet<string> = new Set(['', '0', 'false', 'no', 'off']);
