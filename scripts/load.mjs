// `node scripts/load.mjs [workers] [-- command...]`: keeps every core busy, to run the test
// suite as it runs on a loaded CI machine (issue 28: races that only show under load).
// With a command after `--`, runs it under the load and exits with its status; without,
// loads until Ctrl-C. Workers default to the number of cores; each is a busy loop at normal
// priority, as a noisy neighbour on a shared CI machine is, so every core is saturated and
// the command under test gets about half of each.
import { spawn } from 'node:child_process';
import os from 'node:os';

const sep = process.argv.indexOf('--');
const args = sep === -1 ? process.argv.slice(2) : process.argv.slice(2, sep);
const command = sep === -1 ? [] : process.argv.slice(sep + 1);
const workers = args[0] === undefined ? os.availableParallelism() : Number(args[0]);
if (!Number.isInteger(workers) || workers < 1 || workers > 256) {
  console.error(`load: workers must be a whole number from 1 to 256, not ${JSON.stringify(args[0])}`);
  process.exit(2);
}

const busy = 'for (;;) { for (let i = 0; i < 1e7; i++); }';
const children = Array.from({ length: workers }, () => spawn(process.execPath, ['-e', busy], { stdio: 'ignore' }));
const stop = () => {
  for (const c of children) c.kill('SIGKILL');
};
process.on('exit', stop);
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(130));
console.error(`load: ${workers} busy worker(s) started (pids ${children.map((c) => c.pid).join(' ')})`);

if (command.length) {
  const run = spawn(command[0], command.slice(1), { stdio: 'inherit', shell: false });
  run.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
