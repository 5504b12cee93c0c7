// Who listens on a port, from /proc (Linux): the socket's inode in /proc/net/tcp{,6},
// then the process holding that inode among its fds. A start that would fail with
// EADDRINUSE can then name the process in the way, not just the port.
import fs from 'node:fs';

/** Inodes of the sockets listening on `port` (state 0A), IPv4 and IPv6. */
function listeningInodes(port) {
  const inodes = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.length < 10 || f[3] !== '0A') continue;
      if (parseInt(f[1].split(':').pop(), 16) === port) inodes.add(f[9]);
    }
  }
  return inodes;
}

/**
 * The process listening on `port`, as { pid, command }, or undefined when none does or
 * it cannot be told (not Linux, or another user's process: its fds are not ours to read,
 * then `pid` is undefined but the port is still reported in use).
 */
export function listenerOn(port) {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  for (const pid of fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    let fds;
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target;
      try {
        target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1])) {
        let command = '';
        try {
          command = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
        } catch {
          // Gone meanwhile.
        }
        return { pid: Number(pid), command };
      }
    }
  }
  return { pid: undefined, command: '' };
}
