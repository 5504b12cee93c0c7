import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import express, { type Router } from 'express';
import { adminAudit } from '../events/admin-events.js';
import type { EventLog, NewEvent } from '../events/event-log.js';
import { adminErrors, jsonBody } from '../http/http.js';
import { notFound } from '../errors.js';
import { adminRoute, requireAudited, unauditedWrites } from './routes.js';

const noop = () => undefined;

describe('unauditedWrites', () => {
  it('names every write route without an audit, in nested routers too, and no read', () => {
    const inner = express.Router();
    inner.route('/things/:id').get(noop).delete(noop);
    const outer = express.Router();
    outer.post('/things', noop);
    outer.get('/list', noop);
    adminRoute(outer, '/audited', { get: noop, post: { audit: () => ({ reason: 'x', object: 'x', what: 'done' }), handle: noop } });
    outer.use(inner);
    expect(unauditedWrites([outer])).toEqual(['POST /things', 'DELETE /things/:id']);
    expect(() => requireAudited([outer])).toThrow(
      'admin write routes without an audit (register them with adminRoute, api/routes.ts): POST /things, DELETE /things/:id',
    );
  });

  it('counts an audit only as the first handler of its method: a handler before it may answer unrecorded', () => {
    const r = express.Router();
    const audited = express.Router();
    adminRoute(audited, '/x', { put: { audit: () => ({ reason: 'x', object: 'x', what: 'done' }), handle: noop } });
    // The audit of another route, put second.
    const auditOfX = (audited.stack[0] as unknown as { route: { stack: { handle: unknown }[] } }).route.stack[0]!.handle as express.RequestHandler;
    r.route('/y').put(noop, auditOfX);
    expect(unauditedWrites([r, audited])).toEqual(['PUT /y']);
  });
});

describe('adminRoute on a real server', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((r) => server?.close(r));
    server = undefined;
  });

  async function serve(routes: Router, withAudit = true) {
    const recorded: NewEvent[] = [];
    const events = { record: (e: NewEvent) => recorded.push(e) } as unknown as EventLog;
    const app = express();
    app.use((_req, res, next) => {
      res.locals.who = { role: 'admin', name: 'ops' };
      next();
    });
    if (withAudit) app.use(adminAudit(events, () => undefined));
    app.use(routes, adminErrors);
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server!.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
      recorded,
      call: (method: string, path: string, body?: unknown) =>
        fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) }),
    };
  }

  const widgets = (ran: string[] = []) => {
    const r = express.Router();
    adminRoute(r, '/widgets/:id', {
      get: (_req, res) => void res.json({ ok: true }),
      post: {
        audit: (d) => ({ reason: 'widget-poke', object: `widget/${d.params.id}`, what: 'poked', detail: String(d.body.why) }),
        handle: [
          ...jsonBody(),
          (req, res) => {
            ran.push(String(req.params.id));
            if (req.params.id === 'missing') throw notFound('no widget "missing"');
            res.json(req.params.id === 'same' ? { already: true } : { id: req.params.id });
          },
        ],
      },
    });
    return r;
  };

  it('records a write that succeeded, with its parameters, body and who made it; a refused one and one that changed nothing are no event', async () => {
    const { recorded, call } = await serve(widgets());
    expect((await call('POST', '/widgets/w%201', { why: 'stuck' })).status).toBe(200);
    expect((await call('POST', '/widgets/missing', { why: 'x' })).status).toBe(404);
    expect((await call('POST', '/widgets/same', {})).status).toBe(200);
    expect((await call('GET', '/widgets/w1')).status).toBe(200);
    expect(recorded).toEqual([{ reason: 'widget-poke', object: 'widget/w 1', type: 'Normal', source: 'admin', who: 'ops', message: 'poked by "ops": stuck' }]);
  });

  it('answers any other method 405 with Allow', async () => {
    const { call } = await serve(widgets());
    const r = await call('DELETE', '/widgets/w1');
    expect([r.status, r.headers.get('allow'), ((await r.json()) as { code: string }).code]).toEqual([405, 'GET, POST, HEAD', 'method_not_allowed']);
  });

  it('refuses the write before its handler runs when no event log is mounted ahead of it', async () => {
    const ran: string[] = [];
    const { call } = await serve(widgets(ran), false);
    const r = await call('POST', '/widgets/w1', { why: 'x' });
    expect([r.status, ((await r.json()) as { error: string }).error]).toEqual([
      500,
      'POST /widgets/w1 has no event log to record into (adminAudit is not mounted ahead of it)',
    ]);
    expect(ran).toEqual([]);
  });
});
