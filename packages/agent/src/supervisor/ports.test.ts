import { describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { PortPool, canBind, type PortHolder } from './ports.js';

/** A bind check that refuses `busy` ports and answers after a turn of the event loop. */
const fakeBind = (busy: Set<number>) => (port: number) => new Promise<boolean>((r) => setImmediate(() => r(!busy.has(port))));
const none = () => false;

describe('PortPool', () => {
  it('hands out ports round-robin, not reusing a just-freed one at once', async () => {
    const pool = new PortPool([100, 102], 'h', fakeBind(new Set()));
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await pool.reserve({}, none));
    expect(got).toEqual([100, 101, 102, 100]);
  });

  it('keeps a holder its previous port while that is bindable', async () => {
    const busy = new Set<number>();
    const pool = new PortPool([100, 109], 'h', fakeBind(busy));
    const holder: PortHolder = { port: 105 };
    expect(await pool.reserve(holder, none)).toBe(105);
    busy.add(105);
    expect(await pool.reserve(holder, none)).toBe(100);
  });

  it('ignores a previous port outside the range', async () => {
    const pool = new PortPool([100, 101], 'h', fakeBind(new Set()));
    expect(await pool.reserve({ port: 5 }, none)).toBe(100);
  });

  it('skips taken and unbindable ports; undefined when none is left', async () => {
    const pool = new PortPool([100, 102], 'h', fakeBind(new Set([101])));
    expect(await pool.reserve({}, (p) => p === 100)).toBe(102);
    expect(await pool.reserve({}, (p) => p !== 101)).toBeUndefined();
    expect(pool.describe()).toBe('100-102 on h');
  });

  it('concurrent reservations do not get the same port', async () => {
    const pool = new PortPool([100, 104], 'h', fakeBind(new Set()));
    const holders: PortHolder[] = [{}, {}, {}];
    const taken = (p: number) => holders.some((h) => h.port === p);
    const ports = await Promise.all(holders.map((h) => pool.reserve(h, taken)));
    expect(new Set(ports).size).toBe(3);
    expect(holders.map((h) => h.port)).toEqual(ports);
  });

  it('canBind sees a port in use', async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as { port: number }).port;
    try {
      expect(await canBind(port, '127.0.0.1')).toBe(false);
    } finally {
      await new Promise((r) => srv.close(r));
    }
    expect(await canBind(port, '127.0.0.1')).toBe(true);
  });
});
