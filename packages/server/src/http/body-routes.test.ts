import express from 'express';
import { describe, expect, it } from '@jest/globals';
import { bodyParser, bodyRoutes, limitBytes } from './body-routes.js';
import { jsonBody } from './http.js';

describe('bodyRoutes', () => {
  it('lists each route with a marked parser, under the paths its routers are mounted at', () => {
    const inner = express.Router();
    inner.route('/beat').post(...jsonBody('2kb'), (_req, res) => void res.end());
    inner.route('/read').get((_req, res) => void res.end());
    const app = express();
    app.use('/agent/v1', inner);
    app.route('/form').post(bodyParser(express.urlencoded({ extended: false, limit: '4kb' }), 'form', '4kb'), (_req, res) => void res.end());
    expect(bodyRoutes(app.router, 'admin')).toEqual([
      { listener: 'admin', method: 'POST', path: '/agent/v1/beat', kind: 'json', limitBytes: 2048 },
      { listener: 'admin', method: 'POST', path: '/form', kind: 'form', limitBytes: 4096 },
    ]);
  });

  it('refuses a route whose body parser it cannot read the limit of', () => {
    const app = express();
    app.route('/raw').post(express.json({ limit: '1kb' }), (_req, res) => void res.end());
    expect(() => bodyRoutes(app.router, 'admin')).toThrow('POST /raw reads its body with a parser not made through bodyParser');
  });

  it('reads limits as body-parser does', () => {
    expect([limitBytes('64kb'), limitBytes('1048576b'), limitBytes('1mb'), limitBytes(7)]).toEqual([65536, 1048576, 1048576, 7]);
    expect(() => limitBytes('1.5mb')).toThrow('not "1.5mb"');
  });
});
