import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import type { Server } from 'node:http';
import { adminErrors } from '../http/http.js';
import { filesApi } from './files-api.js';
import { fileInside } from './inside.js';

let dir: string;
let models: string;
let server: Server;
let base: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-files-api-'));
  models = path.join(dir, 'models');
  fs.mkdirSync(path.join(models, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(models, 'tiny.gguf'), 'weights');
  fs.writeFileSync(path.join(models, 'sub', 'real.gguf'), 'inner');
  fs.writeFileSync(path.join(dir, 'secret'), 'node secret');
  // The finding's repro: a link in --models-dir to a file outside it.
  fs.symlinkSync(path.join(dir, 'secret'), path.join(models, 'out.gguf'));
  fs.symlinkSync('/etc/hostname', path.join(models, 'hostname.gguf'));
  fs.symlinkSync('../secret', path.join(models, 'relative.gguf'));
  fs.symlinkSync(dir, path.join(models, 'updir'));
  // A link that stays inside is served.
  fs.symlinkSync('sub/real.gguf', path.join(models, 'alias.gguf'));
  const app = express();
  app.use(filesApi(models));
  app.use(adminErrors);
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('GET /files/:name', () => {
  it('serves a plain file and a link that stays inside the directory', async () => {
    const plain = await fetch(`${base}/files/tiny.gguf`);
    expect(plain.status).toBe(200);
    expect(await plain.text()).toBe('weights');
    const alias = await fetch(`${base}/files/alias.gguf`);
    expect(alias.status).toBe(200);
    expect(await alias.text()).toBe('inner');
  });

  it.each(['out.gguf', 'hostname.gguf', 'relative.gguf'])('does not serve %s, a symlink leading outside', async (name) => {
    const res = await fetch(`${base}/files/${name}`);
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: string };
    expect(body.error).toContain(`no model file "${name}" in --models-dir`);
  });

  it('keeps Range working on the real file', async () => {
    const res = await fetch(`${base}/files/alias.gguf`, { headers: { Range: 'bytes=2-' } });
    expect(res.status).toBe(206);
    expect(await res.text()).toBe('ner');
  });
});

describe('fileInside', () => {
  it('resolves inside links and refuses outside ones, directories and missing names', async () => {
    expect(await fileInside(models, 'alias.gguf')).toBe(fs.realpathSync(path.join(models, 'sub', 'real.gguf')));
    expect(await fileInside(models, 'out.gguf')).toBeUndefined();
    expect(await fileInside(models, 'updir')).toBeUndefined();
    expect(await fileInside(models, 'sub')).toBeUndefined();
    expect(await fileInside(models, 'missing.gguf')).toBeUndefined();
  });
});
