import { Command, Option } from 'commander';
import type { ExplainView, KeyCreated, KeyView, ModelView, NodeView, ReplicaView, UsageRow } from '@llmgw/shared';
import { call, resolveConnection, type Connection } from './client.js';
import { CtlError, asCtlError, exitCode } from './failure.js';
import { addMembershipCommands } from './membership.js';
import { colours } from './render.js';
import { addTokenCommands } from './tokens-cmd.js';
import { addEventsCommand } from './events-cmd.js';
import { explainText, keysTable, modelsTable, nodeDetails, nodesTable, parseExpiry, replicaErrors, replicasTable, usageTable } from './tables.js';

const program = new Command('ctl')
  .description("llmgw's operator CLI over the admin API")
  .version('0.1.0')
  .addOption(new Option('--server <url>', 'admin address of the llmgw server').env('LLMGW_SERVER'))
  .addOption(new Option('--token <token>', 'admin token (default: ~/.llmgw/server/admin-token when present)').env('LLMGW_ADMIN_TOKEN'))
  .addOption(new Option('--ca <file>', "the server's CA (PEM) to verify it with (default: ~/.llmgw/server/tls/ca.pem when present, else the system's CAs)").env('LLMGW_CA'))
  .addOption(new Option('--insecure-http', 'allow an http:// --server on another machine (only behind a proxy that terminates TLS)').env('LLMGW_INSECURE_HTTP'))
  .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'))
  .showHelpAfterError('(run ctl --help for usage)')
  .configureOutput({ outputError: (str, write) => write(str) });

function globals(): { conn: Connection; json: boolean } {
  const o = program.opts<{ server?: string; token?: string; ca?: string; insecureHttp?: boolean; output: string }>();
  return { conn: resolveConnection(o, program.getOptionValueSource('server')), json: o.output === 'json' };
}

function print(text: string): void {
  if (text) process.stdout.write(`${text}\n`);
}

function printJson(v: unknown): void {
  process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

const nodes = program
  .command('nodes')
  .description('list the machines in the fleet: state, GPUs (free/total), memory, replicas (ctl nodes delete|approve <node>)')
  .action(async () => {
    const { conn, json } = globals();
    const nodes = await call<NodeView[]>(conn, 'GET', '/nodes');
    if (json) return printJson(nodes);
    const c = colours();
    print(nodesTable(nodes, c));
    const details = nodeDetails(nodes);
    if (details) print(`\n${details}`);
  });

addMembershipCommands(program, nodes, globals);

for (const [verb, desc] of [
  ['cordon', 'stop placing new replicas on a node (running ones stay)'],
  ['uncordon', 'make a node schedulable again'],
] as const) {
  program
    .command(`${verb} <node>`)
    .description(desc)
    .option('--reason <text>', 'why, shown in ctl nodes and kept with the state')
    .action(async (node: string, o: { reason?: string }) => {
      const { conn, json } = globals();
      const res = await setState(conn, node, { state: verb, ...(o.reason ? { reason: o.reason } : {}) });
      if (json) return printJson(res);
      print(`node/${res.id} ${verb === 'uncordon' ? 'uncordoned' : 'cordoned'}`);
    });
}

program
  .command('drain <node>')
  .description('move replicas off a node, each replacement started and ready before the old one stops; then keep it empty')
  .option('--reason <text>', 'why, shown in ctl nodes and kept with the state')
  .option('--deadline <duration>', 'after this long (e.g. 10m), stop what is left without waiting for replacements')
  .option('--force', 'stop replicas at once, without starting replacements first')
  .option('--no-wait', 'return at once instead of waiting for the node to be empty')
  .option('--timeout <duration>', 'give up waiting after this long (the drain goes on)', '30m')
  .action(async (node: string, o: { reason?: string; deadline?: string; force?: boolean; wait: boolean; timeout: string }) => {
    const { conn, json } = globals();
    const body = {
      state: 'drain',
      ...(o.reason ? { reason: o.reason } : {}),
      ...(o.deadline ? { deadline_s: parseDuration(o.deadline, '--deadline') } : {}),
      ...(o.force ? { force: true } : {}),
    };
    const res = await setState(conn, node, body);
    if (!o.wait) {
      if (json) return printJson(res);
      return print(`node/${res.id} draining`);
    }
    if (!json) print(`node/${res.id} draining`);
    const timeoutMs = parseDuration(o.timeout, '--timeout') * 1000;
    const started = Date.now();
    let last = '';
    for (;;) {
      const n = (await call<NodeView[]>(conn, 'GET', '/nodes')).find((x) => x.id === res.id);
      if (!n) throw new CtlError(`node ${res.id} disappeared`);
      if (n.state !== 'draining') throw new CtlError(`node ${res.id} is ${n.state} now; the drain was cancelled`);
      if (n.replicas === 0) {
        if (json) return printJson(n);
        return print(`node/${res.id} drained`);
      }
      const status = n.drain_status ?? `${n.replicas} left`;
      if (status !== last && !json) process.stderr.write(`  ${status}\n`);
      last = status;
      if (Date.now() - started > timeoutMs) {
        throw new CtlError(`node ${res.id} still holds ${n.replicas} shard(s) after ${o.timeout}: ${status} (the drain goes on; see ctl nodes)`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  });

function setState(conn: Connection, node: string, body: Record<string, unknown>) {
  return call<{ id: string; state: string; reason?: string }>(conn, 'POST', `/nodes/${encodeURIComponent(node)}/state`, body);
}

/** `90s`, `10m`, `2h` or plain seconds → seconds. */
function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text.trim());
  if (!m) throw new CtlError(`invalid ${flag} "${text}": want a duration like 90s, 10m or 2h`, 'usage');
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[(m[2] ?? 's') as 's' | 'm' | 'h'];
}

program
  .command('models')
  .description('list the catalog: ready/total replicas, scaling, profiles, aliases, fallbacks')
  .action(async () => {
    const { conn, json } = globals();
    const models = await call<ModelView[]>(conn, 'GET', '/models');
    if (json) return printJson(models);
    const c = colours();
    print(modelsTable(models, c));
    const short = models.filter((m) => m.placement_summary);
    if (short.length) print(`\n${short.map((m) => `${m.name}: ${m.placement_summary} (ctl explain ${m.name})`).join('\n')}`);
  });

program
  .command('replicas')
  .description('list replicas with their state, nodes and GPUs, endpoint and error')
  .option('--model <name>', 'only this model (name or alias)')
  .option('--show-keys', "include each engine's API key (to call an engine directly)")
  .action(async (o: { model?: string; showKeys?: boolean }) => {
    const { conn, json } = globals();
    const params = new URLSearchParams();
    if (o.model) params.set('model', o.model);
    if (o.showKeys) params.set('show_keys', 'true');
    const q = params.size ? `?${params}` : '';
    const replicas = await call<ReplicaView[]>(conn, 'GET', `/replicas${q}`);
    if (json) return printJson(replicas);
    print(replicasTable(replicas, colours()));
    const errors = replicaErrors(replicas);
    if (errors) print(`\n${errors}`);
    if (o.showKeys) print(`\n${replicas.map((r) => `${r.id}: ${r.api_key ?? '-'}`).join('\n')}`);
  });

program
  .command('logs <replica>')
  .description("show the end of a replica's engine log, as its agent last sent it")
  .option('--rank <n>', 'which shard of a multi-node replica', '0')
  .action(async (replica: string, o: { rank: string }) => {
    const { conn, json } = globals();
    const res = await call<{ replica: string; shard: string; node: string; log: string }>(
      conn,
      'GET',
      `/replicas/${encodeURIComponent(replica)}/logs?rank=${encodeURIComponent(o.rank)}`,
    );
    if (json) return printJson(res);
    process.stdout.write(res.log.endsWith('\n') || !res.log ? res.log : `${res.log}\n`);
  });

program
  .command('explain <model>')
  .description('say why a model is or is not placed, node by node')
  .action(async (model: string) => {
    const { conn, json } = globals();
    const v = await call<ExplainView>(conn, 'GET', `/explain-placement?model=${encodeURIComponent(model)}`);
    if (json) return printJson(v);
    print(explainText(v, colours()));
  });

const keys = program.command('keys').description('client API keys for the OpenAI-compatible endpoint');

keys
  .command('create')
  .description('create a key; its secret is shown once')
  .requiredOption('--name <name>', 'who or what the key is for')
  .option('--models <a,b>', 'models (names or aliases) the key may use; default all')
  .option('--rpm <n>', 'requests per minute')
  .option('--max-concurrent <n>', 'requests in flight at once')
  .option('--expires <when>', 'a duration (30d, 12h, 90m) or an ISO 8601 time')
  .action(async (o: { name: string; models?: string; rpm?: string; maxConcurrent?: string; expires?: string }) => {
    const { conn, json } = globals();
    const int = (flag: string, v: string | undefined) => {
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new CtlError(`invalid ${flag} "${v}": want a whole number >= 1`, 'usage');
      return n;
    };
    const body = {
      name: o.name,
      ...(o.models ? { models: o.models.split(',').map((m) => m.trim()).filter(Boolean) } : {}),
      ...(o.rpm ? { rpm: int('--rpm', o.rpm) } : {}),
      ...(o.maxConcurrent ? { max_concurrent: int('--max-concurrent', o.maxConcurrent) } : {}),
      ...(o.expires ? { expires_at: parseExpiry(o.expires, new Date()) } : {}),
    };
    const created = await call<KeyCreated>(conn, 'POST', '/keys', body);
    if (json) return printJson(created);
    print(`key/${created.key.id} created for ${created.key.name}`);
    print(`secret: ${created.secret}`);
    print('Store it now: it is not shown again.');
  });

keys
  .command('list')
  .description('list keys (never their secrets)')
  .action(async () => {
    const { conn, json } = globals();
    const list = await call<KeyView[]>(conn, 'GET', '/keys');
    if (json) return printJson(list);
    print(keysTable(list, new Date()));
  });

keys
  .command('revoke <id>')
  .description('revoke a key by id (or by name); it stops working at once')
  .action(async (id: string) => {
    const { conn, json } = globals();
    const k = await call<KeyView>(conn, 'DELETE', `/keys/${encodeURIComponent(id)}`);
    if (json) return printJson(k);
    print(`key/${k.id} revoked`);
  });

addTokenCommands(program, { globals, print, printJson });
addEventsCommand(program, { globals, print, printJson });

program
  .command('usage')
  .description('requests and tokens per key and model')
  .action(async () => {
    const { conn, json } = globals();
    const rows = await call<UsageRow[]>(conn, 'GET', '/usage');
    if (json) return printJson(rows);
    print(usageTable(rows));
  });

try {
  await program.parseAsync();
} catch (err) {
  const e = asCtlError(err);
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(exitCode(e.failure));
}
