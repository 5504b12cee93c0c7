// One quick-start instance per LLMGW_HOME. Two launchers on one home would share the
// node id, the agent's state directory and the server's store: the second agent joins
// the first server and stops its engines. The lock is a file created exclusively
// (O_EXCL), naming the launcher's pid and its addresses, so a refusal can say who holds it.
import fs from 'node:fs';
import path from 'node:path';

/** The lock file of an LLMGW_HOME. */
export function lockFile(home) {
  return path.join(home, 'local.lock');
}

/** The lock's record, whoever holds it (undefined when there is none or it is torn). */
export function readRecord(file) {
  try {
    const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
    return rec !== null && typeof rec === 'object' ? rec : undefined;
  } catch {
    return undefined;
  }
}

/** Whether pid is a live process (EPERM: alive, but another user's). */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * The instance holding the lock, or undefined when there is none or its launcher is gone
 * (a launcher killed with SIGKILL leaves its file behind; a pid reused by another program
 * is not a launcher: on Linux its command line says so).
 */
export function holder(home) {
  let held;
  try {
    held = JSON.parse(fs.readFileSync(lockFile(home), 'utf8'));
  } catch {
    return undefined;
  }
  if (!Number.isInteger(held?.pid) || !alive(held.pid)) return undefined;
  try {
    if (!fs.readFileSync(`/proc/${held.pid}/cmdline`, 'utf8').includes('local.mjs')) return undefined;
  } catch {
    // No /proc (not Linux) or not ours to read: a live pid is taken at its word.
  }
  return held;
}

/** The one line that refuses a second instance. */
export function refusal(home, held) {
  const where = [held.client_addr && `client ${held.client_addr}`, held.admin_addr && `admin ${held.admin_addr}`].filter(Boolean).join(', ');
  return `llmgw: already running for LLMGW_HOME=${home} (pid ${Number.isInteger(held.pid) ? held.pid : '?'}${where ? `, ${where}` : ''}): stop it with \`pnpm stop\`, or set LLMGW_HOME to start another`;
}

/**
 * Takes the lock for this process, or returns the instance that holds it. Two launchers
 * racing for a free lock cannot both win, because only one exclusive create succeeds. A
 * stale file is removed and the create tried again; two launchers that find the same
 * stale file at once can still both win (the second removes the first's fresh lock).
 * `stale` is the record of a dead launcher's lock that was taken over: it names the
 * children that launcher may have left running (leftovers.mjs).
 */
export function acquire(home, info) {
  const file = lockFile(home);
  // The lock appears whole: written beside it, then hard-linked into place, which fails
  // when the name exists, as O_EXCL does. A file created with O_EXCL and then written is
  // empty for a moment, and a launcher reading it then took it for stale and removed it.
  const tmp = `${file}.${process.pid}.new`;
  let stale;
  fs.writeFileSync(tmp, JSON.stringify({ pid: process.pid, ...info }) + '\n');
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.linkSync(tmp, file);
        return { ok: true, stale };
      } catch (err) {
        if (err.code !== 'EEXIST') throw err;
      }
      const held = holder(home);
      if (held) return { ok: false, held };
      stale = readRecord(file) ?? stale;
      fs.rmSync(file, { force: true });
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  const held = holder(home);
  return held ? { ok: false, held } : { ok: false, held: { pid: NaN } };
}

/** Rewrites the lock (still ours) with what is known now: the child pids, the real addresses. */
export function update(home, info) {
  const file = lockFile(home);
  const tmp = `${file}.${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify({ pid: process.pid, ...info }) + '\n');
  fs.renameSync(tmp, file);
}

/** Removes the lock if this process still holds it. */
export function release(home) {
  try {
    const held = JSON.parse(fs.readFileSync(lockFile(home), 'utf8'));
    if (held.pid === process.pid) fs.rmSync(lockFile(home), { force: true });
  } catch {
    // Gone already.
  }
}
