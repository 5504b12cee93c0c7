import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { pino } from 'pino';
import { LOG_REDACT, addSettings, nearest, readSettings, splitServerList } from '@llmgw/shared';
import { Agent, AGENT_VERSION } from './agent.js';
import { NodeCredential, credentialFile } from './credential.js';
import { heartbeatSeqBase } from './heartbeat-seq.js';
import { probeMachine } from './probe/index.js';
import { RUN_SETTINGS, defaultAdvertiseAddr, defaultNodeId, parseLabels, parsePortRange, parseSize, type RunSettings } from './settings.js';
import { ModelCache } from './files/cache.js';
import { parseSourceHeaders } from './files/headers.js';
import { ModelFiles } from './files/store.js';
import { serverClient } from './trust.js';
import { DEFAULT_ENGINE_USER, resolveEngineUser, type EngineUser } from './engine-user.js';
import { installService } from './service.js';
import { estimateForSource, writeTestLora, writeTestModel } from '@llmgw/gguf';
import { findEnginePrograms } from './engine-programs.js';
import { Supervisor } from './supervisor/index.js';
import { checkServerList, establishTrust } from './trust.js';
import { ServerPool } from './servers.js';

const here = path.dirname(fileURLToPath(import.meta.url));

const program = new Command('llmgw-agent')
  .description('Runs on each machine: reports it to the llmgw server and runs the engines assigned to it.')
  .version(AGENT_VERSION)
  .addHelpText('after', '\nEvery setting of run (each also an LLMGW_* variable): llmgw-agent run --help');

const run = addSettings(program.command('run', { isDefault: true }), RUN_SETTINGS)
  .description('join the server and run assigned engines (the default command)')
  .addHelpText(
    'after',
    "\nThe join token is read from LLMGW_JOIN_TOKEN (never a flag: flags show up in ps). The full token (llmgw-server join-token)\npins the server's CA: the agent checks the CA against it before it sends anything, then trusts that CA alone." +
      "\nThe token is sent once, to join: the server answers with this node's own credential, kept in <state-dir>/node-credential.json" +
      '\n(0600) and used from then on. A refused join (the node id is taken, the token is wrong) is one line and exit 1.' +
      '\nModel files are fetched through LLMGW_HTTP_PROXY when set (model downloads only), else HTTPS_PROXY / HTTP_PROXY / NO_PROXY as usual;' +
      "\nllmgw:// sources come from the server with this node's credential, never through a proxy.",
  )
  .action(async () => {
    const joinToken = process.env.LLMGW_JOIN_TOKEN;
    if (!joinToken) fail("LLMGW_JOIN_TOKEN is not set: export the server's join token (see the server's data directory, file join-token)");
    let o: RunSettings;
    let labels: Record<string, string> = {};
    let portRange: [number, number] = [40000, 40999];
    let engineUser: EngineUser | undefined;
    try {
      o = readSettings(run, RUN_SETTINGS);
      labels = parseLabels(o.labels);
      portRange = parsePortRange(o.portRange);
      // A mistyped --server is a usage error, named before the machine's own set-up (the engine user) is checked.
      checkServerList(o.server, o.insecureHttp);
      engineUser = resolveEngineUser(o.engineUser || undefined);
    } catch (e) {
      fail((e as Error).message);
    }
    const log = pino({ level: o.logLevel, base: { svc: 'llmgw-agent' }, redact: LOG_REDACT });
    const { allowCommandEngine } = o;
    const serverList = splitServerList(o.server);
    // Before anything is sent: a token whose pin the server's CA does not match stops here.
    let trust: Awaited<ReturnType<typeof establishTrust>> = { secret: '' };
    try {
      trust = await establishTrust({ server: serverList, joinToken, insecureHttp: o.insecureHttp, ...(o.ca ? { caFile: path.resolve(o.ca) } : {}) }, log);
    } catch (e) {
      fail((e as Error).message);
    }
    // One pool for every caller, so an instance one of them finds gone is left by all.
    const server = new ServerPool(serverList, log);
    const stateDir = path.resolve(o.stateDir);
    let files: ModelFiles | undefined;
    try {
      const maxBytes = o.modelCacheMax ? parseSize('--model-cache-max', o.modelCacheMax) : undefined;
      const cache = new ModelCache(path.resolve(o.modelCache || path.join(stateDir, 'models')), maxBytes, log);
      files = new ModelFiles({
        cache,
        server,
        serverClient: serverClient(trust.ca),
        auth: { header: () => auth.header(), rejected: (h) => auth.rejected(h) },
        headers: parseSourceHeaders(o.sourceHeader),
        inUse: () => supervisor.filesInUse(),
        log,
      });
    } catch (e) {
      fail((e as Error).message);
    }
    const programs = findEnginePrograms();
    const supervisor = new Supervisor({
      stateDir,
      portRange,
      bindHost: o.engineHost,
      bins: {
        vllm: o.vllmBin,
        ...(o.vllmPython ? { vllmPython: o.vllmPython } : {}),
        sglangPython: o.sglangPython,
        llamaServer: o.llamaServerBin,
        // Without @llmgw/engine-llama installed, whatever PATH has under that name.
        nodeLlamaCpp: programs.get('node-llama-cpp-engine') ?? 'node-llama-cpp-engine',
        programs,
      },
      maxRestarts: o.maxRestarts,
      backoffBaseMs: o.restartBackoffMs,
      allowCommandEngine,
      ...(engineUser ? { engineUser } : {}),
      files,
      log,
    });
    await supervisor.adopt();
    files.evict();
    const extraFabrics = o.fabrics
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const nodeId = o.nodeId || defaultNodeId();
    // A refused join is final: one line and a non-zero exit, not a retry loop (engines keep running).
    const auth = new NodeCredential({
      server,
      joinToken: trust.secret,
      ...(trust.ca ? { ca: trust.ca } : {}),
      nodeId,
      stateDir,
      log,
      onRefused: (line) => {
        log.error({ node: nodeId, credential: credentialFile(stateDir) }, line);
        process.exit(1);
      },
    });
    const agent = new Agent(
      {
        server,
        joinToken: trust.secret,
        ...(trust.ca ? { ca: trust.ca } : {}),
        auth,
        nodeId,
        labels,
        ...(o.pool ? { pool: o.pool } : {}),
        advertiseAddr: o.advertiseAddr || defaultAdvertiseAddr(server.current),
        heartbeatIntervalMs: o.heartbeatIntervalMs,
        probeIntervalMs: Math.max(o.heartbeatIntervalMs, 10_000),
        allowCommandEngine,
        files: () => files.list(),
        seqBase: heartbeatSeqBase(stateDir),
      },
      () => probeMachine({ nvidiaSmi: o.nvidiaSmi, procRoot: o.procRoot, sysRoot: o.sysRoot, extraFabrics }),
      {
        converge: (a) => supervisor.converge(a),
        statuses: () => supervisor.statuses(),
        onChange: (l) => supervisor.events.on('change', l),
        logTail: (id) => supervisor.logTail(id),
      },
      log,
      async (source) => {
        const e = await estimateForSource(source);
        if (!e) return undefined;
        const mb = (x: number) => Math.ceil(x);
        return { source, memory_mb: mb(e.totalMb), weights_mb: mb(e.weightsMb), kv_cache_mb: mb(e.kvCacheMb), context_length: e.contextLength };
      },
    );
    log.info(
      { server: server.label, node: o.nodeId || defaultNodeId(), stateDir, engineUser: engineUser?.name ?? os.userInfo().username, allowCommandEngine },
      'llmgw-agent starting',
    );
    // By default engines keep running when the agent stops: an upgrade must not take
    // models down. The new agent re-adopts them.
    const stopEngines = o.stopEnginesOnExit;
    const shutdown = async (signal: string) => {
      log.info({ signal, stopEngines }, stopEngines ? 'agent stopping with its engines' : 'agent stopping; engines keep running');
      agent.stop();
      await supervisor.shutdown({ stopEngines });
      process.exit(0);
    };
    process.on('SIGTERM', () => void shutdown('SIGTERM'));
    process.on('SIGINT', () => void shutdown('SIGINT'));
    await agent.start();
  });

program
  .command('install-service')
  .description('install llmgw-agent as a systemd service on this machine (run as root)')
  .requiredOption(
    '--server <url,...>',
    "the server's admin address, e.g. https://10.0.0.1:8081, or several separated by commas (kept as LLMGW_SERVER; see run --help)",
  )
  .option('--ca <file>', "the server's CA (PEM), kept as LLMGW_CA; needed only with a join token that is just the secret")
  .option('--insecure-http', 'allow an http:// --server on another machine (only behind a proxy that terminates TLS)')
  .option('--node-id <id>', 'stable node id (default: the hostname)')
  .option('--labels <k=v,...>', 'labels for node_selector matching')
  .option('--pool <name>', 'pool for sharded placement')
  .option(
    '--engine-user <name>',
    `the unprivileged account engines run as; created (a system user in the video and render groups) when missing`,
    DEFAULT_ENGINE_USER,
  )
  .option('--allow-command-engine', 'let this node run `engine: command` profiles (LLMGW_ALLOW_COMMAND_ENGINE=1 in the env file)')
  .option('--root <dir>', 'write under this prefix instead of / (for packaging; then no user is created)', '/')
  .option('--no-enable', 'write the files but do not enable and start the service')
  .addHelpText('after', '\nReads the join token from LLMGW_JOIN_TOKEN and stores it in /etc/llmgw/agent.env (mode 0600).')
  .action(
    (o: {
      server: string;
      ca?: string;
      insecureHttp?: boolean;
      nodeId?: string;
      labels?: string;
      pool?: string;
      root: string;
      enable: boolean;
      engineUser: string;
      allowCommandEngine?: boolean;
    }) => {
      const joinToken = process.env.LLMGW_JOIN_TOKEN;
      if (!joinToken) fail("LLMGW_JOIN_TOKEN is not set: export the server's join token first");
      try {
        checkServerList(o.server, Boolean(o.insecureHttp));
        if (o.labels) parseLabels(o.labels);
      } catch (e) {
        fail((e as Error).message);
      }
      const env: Record<string, string> = { LLMGW_SERVER: o.server, LLMGW_JOIN_TOKEN: joinToken };
      if (o.ca) env.LLMGW_CA = path.resolve(o.ca);
      if (o.insecureHttp) env.LLMGW_INSECURE_HTTP = '1';
      if (o.nodeId) env.LLMGW_NODE_ID = o.nodeId;
      if (o.labels) env.LLMGW_LABELS = o.labels;
      if (o.pool) env.LLMGW_POOL = o.pool;
      env.LLMGW_ENGINE_USER = o.engineUser;
      if (o.allowCommandEngine) env.LLMGW_ALLOW_COMMAND_ENGINE = '1';
      try {
        const r = installService({ root: o.root, env, enable: o.enable, node: process.execPath, main: path.join(here, 'main.js') });
        process.stdout.write(`wrote ${r.unitPath}\nwrote ${r.envPath}\n${o.enable ? 'enabled and started llmgw-agent.service\n' : ''}`);
      } catch (e) {
        fail(`cannot install the service: ${(e as Error).message}`);
      }
    },
  );

program
  .command('make-test-model')
  .description('write a tiny random-weight llama GGUF (printable noise, ChatML template) for the node-llama-cpp engine')
  .requiredOption('--out <file>', 'where to write the .gguf')
  .option('--seed <n>', 'seed for the weights; the same seed gives the same file', '1')
  .action((o: { out: string; seed: string }) => {
    if (!/^\d+$/.test(o.seed) || Number(o.seed) > 0xffffffff) fail(`invalid --seed "${o.seed}": want a whole number from 0 to 4294967295`);
    try {
      const m = writeTestModel(o.out, { seed: Number(o.seed) });
      process.stdout.write(`${m.path} ${m.sizeBytes} bytes\n`);
    } catch (e) {
      fail(`cannot write ${o.out}: ${(e as Error).message}`);
    }
  });

program
  .command('make-test-lora')
  .description("write a tiny LoRA GGUF adapter for make-test-model's model: a catalog adapter whose output differs from the base's")
  .requiredOption('--out <file>', 'where to write the .gguf')
  .option('--seed <n>', 'seed for the weights; the same seed gives the same file, another seed another adapter', '7')
  .action((o: { out: string; seed: string }) => {
    if (!/^\d+$/.test(o.seed) || Number(o.seed) > 0xffffffff) fail(`invalid --seed "${o.seed}": want a whole number from 0 to 4294967295`);
    try {
      const m = writeTestLora(o.out, { seed: Number(o.seed) });
      process.stdout.write(`${m.path} ${m.sizeBytes} bytes\n`);
    } catch (e) {
      fail(`cannot write ${o.out}: ${(e as Error).message}`);
    }
  });

function fail(message: string): never {
  process.stderr.write(`llmgw-agent: ${message}\n`);
  process.exit(2);
}

// `run` is the default command, so commander takes a mistyped command (`llmgw-agent rn`)
// for an argument of run and says "too many arguments for 'run'": name the command instead.
const first = process.argv[2];
const commands = [...program.commands.map((c) => c.name()), 'help'];
if (first !== undefined && !first.startsWith('-') && !commands.includes(first)) {
  const near = nearest(first, commands);
  fail(`unknown command '${first}'${near !== undefined ? ` (did you mean ${near}?)` : ''}; the commands are ${commands.join(', ')}`);
}
// Every usage error exits 2, as `fail` does (commander's own would exit 1); help and --version stay 0.
for (const cmd of [program, ...program.commands]) cmd.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
await program.parseAsync();
