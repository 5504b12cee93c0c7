import { Command, Option } from 'commander';
import { flagOrEnv } from '@llmgw/shared';
import { resolveConnection, type Connection } from './client.js';
import { CtlError, asCtlError, exitCode } from './failure.js';
import { addLogsCommand } from './logs-cmd.js';
import { addMembershipCommands } from './membership.js';
import { addNodeStateCommands } from './node-state-cmd.js';
import { safeJson, terminalSafe } from './text.js';
import { addTokenCommands } from './tokens-cmd.js';
import { CommanderError, commanderExit, examples, examplesText, strictUsage, usageHint } from './usage.js';
import { CTL_VERSION, addVersionCommand } from './version-cmd.js';
import { addEventsCommand } from './events-cmd.js';
import { addFilesCommand } from './files-cmd.js';
import { addStatusCommand } from './status-cmd.js';
import { addRolloutCommands } from './rollout-cmd.js';
import { addKeyCommands } from './keys-cmd.js';

// `ctl events | head`: once the reader has gone, a write fails with EPIPE; stop quietly,
// as Unix tools do, instead of dying with a stack trace. Anything else is a real error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

const program = new Command('ctl')
  .description("llmgw's operator CLI over the admin API")
  .version(CTL_VERSION)
  .addOption(
    new Option(
      '--server <url,...>',
      'admin address of the llmgw server, or several separated by commas (instances of one control plane): reads and watches move to the next on a refused or broken connection, a timeout or a 502/503/504; writes only when the connection failed before the request was sent, never after a timeout or an error answer (default: https://127.0.0.1:8081)',
    ).env('LLMGW_SERVER'),
  )
  .addOption(
    new Option('--token <token>', 'admin token (default: the file $LLMGW_HOME/server/admin-token, LLMGW_HOME defaulting to ~/.llmgw)').env('LLMGW_ADMIN_TOKEN'),
  )
  .addOption(
    new Option('--ca <file>', "the server's CA (PEM) to verify it with (default: $LLMGW_HOME/server/tls/ca.pem when present, else the system's CAs)").env(
      'LLMGW_CA',
    ),
  )
  .addOption(
    new Option(
      '--insecure-http',
      'allow an http:// --server on another machine (only behind a proxy that terminates TLS) (or LLMGW_INSECURE_HTTP=1; 0/false/no/off is off)',
    ),
  )
  .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'wide', 'json']).default('table'))
  // Each command's help lists the connection flags too, with their defaults.
  .configureHelp({ showGlobalOptions: true });
examples(
  program,
  'ctl nodes',
  'LLMGW_SERVER=https://10.0.0.1:8081 ctl replicas -o json',
  'ctl --server https://a:8081,https://b:8081 events -w',
  'ctl drain gpu-3 --reason "PSU swap"',
  'ctl <command> --help',
);

function globals(): { conn: Connection; json: boolean; wide: boolean } {
  const o = program.opts<{ server?: string; token?: string; ca?: string; insecureHttp?: boolean; output: string }>();
  // Not commander's .env(): it turns the flag on whenever the variable is defined, =0 included.
  let insecureHttp: boolean;
  try {
    insecureHttp = flagOrEnv(o.insecureHttp, 'LLMGW_INSECURE_HTTP', process.env);
  } catch (e) {
    throw new CtlError((e as Error).message, 'usage');
  }
  return {
    conn: resolveConnection({ ...o, insecureHttp }, program.getOptionValueSource('server'), program.getOptionValueSource('token')),
    json: o.output === 'json',
    // `-o wide`: a table with the columns a command keeps for it; other commands print their table.
    wide: o.output === 'wide',
  };
}

function print(text: string): void {
  if (text) process.stdout.write(`${terminalSafe(text, process.stdout.isTTY === true)}\n`);
}

function printJson(v: unknown): void {
  process.stdout.write(`${safeJson(v, 2)}\n`);
}

const io = { globals, print, printJson };

/** The fleet commands' code, with the tables, chalk and cli-table3: loaded when one of them runs (issue 32). */
const fleet = () => import('./fleet-cmd.js');

const nodes = program
  .command('nodes')
  .description('list the machines in the fleet: state, GPUs (free/total), memory, replicas (ctl nodes delete|approve <node>)')
  .addHelpText('after', examplesText('ctl nodes', "ctl nodes -o json | jq '.[] | {id, state, liveness}'"))
  .action(async () => (await fleet()).nodes(io));

addMembershipCommands(program, nodes, globals);

addNodeStateCommands(program, io);

program
  .command('models [model]')
  .description(
    'list the catalog: ready/total replicas, replicas at the current revision (UP-TO-DATE; ctl rollout status), scaling, profiles, aliases, fallbacks, routing policy, LoRA adapters, revision; a failed reload of the catalog file is the line above. With a model (name or alias), or -o wide: its LoRA adapters too, and the replicas holding each loaded',
  )
  .addHelpText('after', examplesText('ctl models', 'ctl models qwen   # with its LoRA adapters', 'ctl models -o wide', 'ctl models -o json'))
  .action(async (name: string | undefined) => (await fleet()).models(io, name));

program
  .command('replicas')
  .description("list replicas with their state, nodes and GPUs, endpoint and error (or a model file's download progress)")
  .option('--model <name>', 'only this model (name or alias)')
  .option('--show-keys', "include each engine's API key (to call an engine directly)")
  .addHelpText('after', examplesText('ctl replicas --model coder', "ctl replicas --show-keys   # each engine's key, in lines under the table"))
  .action(async (o: { model?: string; showKeys?: boolean }) => (await fleet()).replicas(io, o));

addLogsCommand(program, io);

program
  .command('explain <model>')
  .description('say why a model is or is not placed, node by node; for a LoRA adapter, why it cannot be served too')
  .addHelpText('after', examplesText('ctl explain qwen-coder-14b'))
  .action(async (model: string) => (await fleet()).explain(io, model));

addKeyCommands(program, io);
addTokenCommands(program, io);
addVersionCommand(program, io);
addStatusCommand(program, io);
addEventsCommand(program, io);
addFilesCommand(program, io);
addRolloutCommands(program, io);

// The command being run, for the hint under a usage error found in its action.
let running: Command = program;
program.hook('preAction', (_root, cmd) => {
  running = cmd;
});
strictUsage(
  program,
  (t) => process.stdout.write(t),
  (t) => process.stderr.write(t),
);

try {
  await program.parseAsync();
} catch (err) {
  if (err instanceof CommanderError) process.exit(commanderExit(err));
  const e = asCtlError(err);
  process.stderr.write(`error: ${terminalSafe(e.message)}\n${e.failure === 'usage' ? `${usageHint(running)}\n` : ''}`);
  process.exit(exitCode(e.failure));
}
