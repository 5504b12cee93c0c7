import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The unprivileged account engines run as when the agent is root. */
export const DEFAULT_ENGINE_USER = 'llmgw';

/** An account engines are switched to; see {@link resolveEngineUser}. */
export interface EngineUser {
  name: string;
  uid: number;
  gid: number;
  /** From the account's passwd entry: engines' HOME (model and compile caches go there). */
  home: string;
  /** util-linux setpriv, which switches to the account; see {@link asEngineUser}. */
  setpriv: string;
}

/** Who the agent itself is, passed in so tests can play root. */
export interface Self {
  uid: number;
  name: string;
}

const realSelf = (): Self => ({ uid: process.getuid?.() ?? -1, name: os.userInfo().username });

/**
 * Who engines run as. A root agent must not hand root to whatever a profile names, so
 * it starts engines as `requested` (default `llmgw`), which must exist. An agent that is
 * not root cannot switch users: its engines run as itself, and asking for another user
 * is an error rather than a silent downgrade. Undefined: engines run as the agent does.
 * Throws a one-line error saying what to do.
 */
export function resolveEngineUser(requested: string | undefined, self: Self = realSelf(), lookup = getent, setpriv = findSetpriv): EngineUser | undefined {
  if (self.uid !== 0) {
    if (requested === undefined || requested === self.name) return undefined;
    throw new Error(
      `--engine-user ${requested} needs an agent running as root (this one runs as ${self.name}): drop --engine-user, and engines run as ${self.name}`,
    );
  }
  const name = requested ?? DEFAULT_ENGINE_USER;
  const entry = lookup(name);
  if (!entry) {
    throw new Error(
      `engine user "${name}" does not exist: a root agent starts engines as an unprivileged user; create it (useradd --system --shell /usr/sbin/nologin ${name}, then add it to the video and render groups for GPU access), run \`llmgw-agent install-service\`, which does that, or name another with --engine-user`,
    );
  }
  // Root named on purpose (--engine-user root): nothing to switch.
  if (entry.uid === 0) return undefined;
  const bin = setpriv();
  if (!bin) throw new Error(`cannot start engines as ${name}: setpriv is not installed; install util-linux (it provides setpriv)`);
  return { name, ...entry, setpriv: bin };
}

/** The account's passwd entry through NSS (`getent`), so LDAP and sssd accounts work too. */
export function getent(name: string): { uid: number; gid: number; home: string } | undefined {
  let line: string;
  try {
    line = execFileSync('getent', ['passwd', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined; // exit 2: no such user
  }
  const [, , uid, gid, , home] = line.trim().split(':');
  if (uid === undefined || gid === undefined || !/^\d+$/.test(uid) || !/^\d+$/.test(gid)) return undefined;
  return { uid: Number(uid), gid: Number(gid), home: home ?? '/' };
}

function findSetpriv(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/bin', '/bin', '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    const p = path.join(d || '.', 'setpriv');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/**
 * `argv` run as `user`. Node's spawn can set uid and gid, but libuv then drops every
 * supplementary group, and GPU device nodes are reached through them (video, render);
 * setpriv `--init-groups` sets them from the group database. setpriv switches and execs
 * in place (runuser forks and waits, for PAM), so the engine keeps the pid the agent
 * spawned: the process group, the state file and re-adoption by pid and start time work
 * as without a switch. `--inh-caps=-all` leaves no inheritable capability behind.
 */
export function asEngineUser(argv: readonly string[], user: EngineUser | undefined): string[] {
  if (!user) return [...argv];
  return [user.setpriv, '--reuid', String(user.uid), '--regid', String(user.gid), '--init-groups', '--inh-caps=-all', '--', ...argv];
}

/** Whether `user` may read (`r`) or enter (`x`) `p`; asked as that user, so groups and ACLs count. */
export type AccessAs = (user: EngineUser, p: string, mode: 'r' | 'x') => Promise<boolean>;

const accessAs: AccessAs = (user, p, mode) =>
  new Promise((resolve) => {
    execFile(
      user.setpriv,
      ['--reuid', String(user.uid), '--regid', String(user.gid), '--init-groups', '--', 'test', `-${mode}`, p],
      { timeout: 10_000 },
      (err) => resolve(!err),
    );
  });

/**
 * Why the engine user cannot read a model file or folder, in one line, or undefined when it
 * can. Asked before launching (issue 30: a second agent as root on the quick start's host
 * placed replacement after replacement whose engines, run as `llmgw`, failed on root's 0700
 * `~/.llmgw`, the cause only in the engine's log). The first folder on the way it cannot
 * enter is named, since that is what to change.
 */
export async function unreadableBy(file: string, user: EngineUser, access: AccessAs = accessAs): Promise<string | undefined> {
  if (await access(user, file, 'r')) return undefined;
  const dirs: string[] = [];
  for (let d = path.dirname(file); ; d = path.dirname(d)) {
    dirs.unshift(d);
    if (d === path.dirname(d)) break;
  }
  let blocked: string | undefined;
  for (const d of dirs) {
    if (!(await access(user, d, 'x'))) {
      blocked = d;
      break;
    }
  }
  const what = blocked ?? file;
  return `engine user ${user.name} cannot read ${file}: ${blocked ? `it may not enter ${blocked}` : 'the file is not readable to it'} (${modeOf(what)}); make it readable to ${user.name}, keep models where it can read them, or choose another --engine-user`;
}

function modeOf(p: string): string {
  try {
    const st = fs.statSync(p);
    return `mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}, owner uid ${st.uid}`;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'cannot stat';
  }
}
