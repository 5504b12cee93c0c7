// `pnpm stop`: stops the quick-start instance of $LLMGW_HOME (default ~/.llmgw) from any
// terminal, as Ctrl-C in its own would: the launcher named in the lock stops the server,
// the agent and the engines, then exits. Waits until it has. When the launcher is gone
// (killed) but its server or agent still run, stops those itself.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { holder, alive, lockFile, readRecord } from './local/lock.mjs';
import { describeLeftovers, leftovers, stopLeftovers } from './local/leftovers.mjs';

const home = path.resolve(process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw'));
const held = holder(home);
if (!held) {
  // No launcher, but a killed one may have left its server and agent running.
  const record = readRecord(lockFile(home));
  const left = leftovers(home, record);
  if (left.length === 0) {
    console.log(`llmgw: not running for LLMGW_HOME=${home}`);
    process.exit(0);
  }
  await stopLeftovers(home, left, 7_000);
  fs.rmSync(lockFile(home), { force: true });
  console.log(`llmgw: stopped the ${describeLeftovers(left)} left by a launcher (pid ${record.pid}) that is gone (LLMGW_HOME=${home})`);
  process.exit(0);
}
try {
  process.kill(held.pid, 'SIGTERM');
} catch (err) {
  console.error(`llmgw: cannot stop pid ${held.pid} (${err.code}): it is another user's; stop it as that user`);
  process.exit(1);
}
// The launcher gives its children 7 s before SIGKILL; it is gone soon after.
const deadline = Date.now() + 15_000;
while (alive(held.pid)) {
  if (Date.now() > deadline) {
    console.error(`llmgw: pid ${held.pid} is still running 15 s after SIGTERM; its logs: ${path.join(home, 'logs')}`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 100));
}
console.log(`llmgw: stopped (pid ${held.pid}, LLMGW_HOME=${home})`);
