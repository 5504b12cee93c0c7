import { describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asEngineUser, getent, resolveEngineUser, unreadableBy } from './engine-user.js';
import { engineEnvironment } from './supervisor/spawn.js';

const root = { uid: 0, name: 'root' };
const alice = { uid: 1000, name: 'alice' };
const accounts: Record<string, { uid: number; gid: number; home: string }> = {
  llmgw: { uid: 990, gid: 985, home: '/var/lib/llmgw-agent/engine' },
  root: { uid: 0, gid: 0, home: '/root' },
};
const lookup = (n: string) => accounts[n];
const setpriv = () => '/usr/bin/setpriv';

describe('resolveEngineUser', () => {
  it('a root agent runs engines as llmgw by default, or as --engine-user', () => {
    expect(resolveEngineUser(undefined, root, lookup, setpriv)).toEqual({
      name: 'llmgw',
      uid: 990,
      gid: 985,
      home: '/var/lib/llmgw-agent/engine',
      setpriv: '/usr/bin/setpriv',
    });
    accounts.svc = { uid: 991, gid: 991, home: '/' };
    expect(resolveEngineUser('svc', root, lookup, setpriv)?.uid).toBe(991);
  });

  it('a root agent whose engine user does not exist refuses to start, saying how to create it', () => {
    expect(() => resolveEngineUser('nobody-here', root, lookup, setpriv)).toThrow(
      /^engine user "nobody-here" does not exist: .*useradd --system --shell \/usr\/sbin\/nologin nobody-here.*run `llmgw-agent install-service`/,
    );
  });

  it('needs setpriv to switch, and nothing when told to run engines as root', () => {
    expect(() => resolveEngineUser(undefined, root, lookup, () => undefined)).toThrow('install util-linux');
    expect(resolveEngineUser('root', root, lookup, () => undefined)).toBeUndefined();
  });

  it('an agent that is not root runs engines as itself, and refuses another user instead of ignoring it', () => {
    expect(resolveEngineUser(undefined, alice, lookup, setpriv)).toBeUndefined();
    expect(resolveEngineUser('alice', alice, lookup, setpriv)).toBeUndefined();
    expect(() => resolveEngineUser('llmgw', alice, lookup, setpriv)).toThrow('--engine-user llmgw needs an agent running as root (this one runs as alice)');
  });

  it('reads accounts through getent', () => {
    expect(getent('root')).toMatchObject({ uid: 0, gid: 0 });
    expect(getent('no-such-user-llmgw-test')).toBeUndefined();
  });
});

describe('asEngineUser', () => {
  it('wraps the engine in setpriv with the user, its groups and no inheritable capabilities', () => {
    const u = { name: 'llmgw', uid: 990, gid: 985, home: '/h', setpriv: '/usr/bin/setpriv' };
    expect(asEngineUser(['vllm', 'serve', 'm'], u)).toEqual([
      '/usr/bin/setpriv',
      '--reuid',
      '990',
      '--regid',
      '985',
      '--init-groups',
      '--inh-caps=-all',
      '--',
      'vllm',
      'serve',
      'm',
    ]);
    expect(asEngineUser(['vllm'], undefined)).toEqual(['vllm']);
  });
});

describe('engineEnvironment', () => {
  const agentEnv = {
    PATH: '/usr/bin',
    HOME: '/root',
    USER: 'root',
    LANG: 'C.UTF-8',
    LLMGW_JOIN_TOKEN: 'secret-join',
    LLMGW_SERVER: 'https://10.0.0.1:8081',
    AWS_SECRET_ACCESS_KEY: 'aws',
    NCCL_SOCKET_IFNAME: 'eth0',
    HF_HOME: '/models/hf',
    CUDA_CACHE_PATH: '/c',
  };

  it('passes an allow-list of the agent environment, the engine user identity, then the engine own variables', () => {
    const u = { name: 'llmgw', uid: 990, gid: 985, home: '/var/lib/llmgw-agent/engine', setpriv: '/usr/bin/setpriv' };
    expect(engineEnvironment({ CUDA_VISIBLE_DEVICES: 'GPU-1', FOO: 'bar' }, u, agentEnv)).toEqual({
      PATH: '/usr/bin',
      LANG: 'C.UTF-8',
      NCCL_SOCKET_IFNAME: 'eth0',
      HF_HOME: '/models/hf',
      CUDA_CACHE_PATH: '/c',
      HOME: '/var/lib/llmgw-agent/engine',
      USER: 'llmgw',
      LOGNAME: 'llmgw',
      CUDA_VISIBLE_DEVICES: 'GPU-1',
      FOO: 'bar',
    });
  });

  it('keeps the agent own HOME and USER when there is no switch, and never its credentials', () => {
    const env = engineEnvironment({}, undefined, agentEnv);
    expect(env).toMatchObject({ HOME: '/root', USER: 'root' });
    expect(Object.keys(env).filter((k) => k.startsWith('LLMGW_') || k.startsWith('AWS_'))).toEqual([]);
  });
});

describe('unreadableBy', () => {
  const u = { name: 'llmgw', uid: 990, gid: 985, home: '/h', setpriv: '/usr/bin/setpriv' };

  it('is quiet when the engine user can read the file, and names the first folder it cannot enter', async () => {
    const readable = async () => true;
    expect(await unreadableBy('/root/.llmgw/models/tiny.gguf', u, readable)).toBeUndefined();
    const asked: string[] = [];
    const rootHome = async (_u: unknown, p: string, mode: 'r' | 'x') => {
      asked.push(`${mode} ${p}`);
      return mode === 'x' && (p === '/' || p === '/root') ? p === '/' : false;
    };
    const why = await unreadableBy('/root/.llmgw/models/tiny.gguf', u, rootHome);
    expect(why).toMatch(/^engine user llmgw cannot read \/root\/.llmgw\/models\/tiny.gguf: it may not enter \/root \(/);
    expect(why).toContain('make it readable to llmgw');
    expect(asked).toEqual(['r /root/.llmgw/models/tiny.gguf', 'x /', 'x /root']);
    const fileOnly = async (_u: unknown, _p: string, mode: 'r' | 'x') => mode === 'x';
    expect(await unreadableBy('/srv/m.gguf', u, fileOnly)).toMatch(/: the file is not readable to it \(/);
  });

  const asRoot = process.getuid?.() === 0 && fs.existsSync('/usr/bin/setpriv') && getent('nobody');
  (asRoot ? it : it.skip)('asks as the user itself (root here: as nobody, through setpriv)', async () => {
    const nobody = { name: 'nobody', ...getent('nobody')!, setpriv: '/usr/bin/setpriv' };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-read-'));
    const file = path.join(dir, 'm.gguf');
    fs.writeFileSync(file, 'GGUF');
    try {
      fs.chmodSync(dir, 0o755);
      fs.chmodSync(file, 0o644);
      expect(await unreadableBy(file, nobody)).toBeUndefined();
      fs.chmodSync(dir, 0o700);
      expect(await unreadableBy(file, nobody)).toMatch(new RegExp(`it may not enter ${dir} \\(mode 0700, owner uid 0\\)`));
      fs.chmodSync(dir, 0o755);
      fs.chmodSync(file, 0o600);
      expect(await unreadableBy(file, nobody)).toMatch(/the file is not readable to it \(mode 0600/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
