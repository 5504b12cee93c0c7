import fs from 'node:fs/promises';
import path from 'node:path';
import express, { type Router } from 'express';
import { DomainError, echo } from '../errors.js';
import { methodNotAllowed } from '../http/http.js';
import { fileInside } from './inside.js';
import { badFileName } from './sources.js';

/**
 * `GET /agent/v1/files/:name`: the files of `--models-dir`, for `llmgw://NAME` sources,
 * to agents that sent their node credential (the router is mounted behind that check).
 * Express's `sendFile` (the `send` package) streams the file and answers `Range`
 * requests with 206 and `Content-Range`, so an agent resumes an interrupted transfer;
 * it also refuses anything outside `root`. Names are checked first anyway, so a request
 * for `../x`, a hidden file or a subdirectory gets a clear 404 that says why, and a
 * symlink leading out of the directory is not served ({@link fileInside}).
 * `modelsDir` undefined: the server serves no files, and says how to make it.
 */
export function filesApi(modelsDir: string | undefined): Router {
  const r = express.Router();
  const root = modelsDir === undefined ? undefined : path.resolve(modelsDir);
  r.route('/files/:name')
    .get(async (req, res, next) => {
      const name = String(req.params.name);
      if (root === undefined)
        throw new DomainError('not_found', 'this server serves no model files: start llmgw-server with --models-dir DIR for llmgw:// sources');
      const bad = badFileName(name);
      if (bad) throw new DomainError('not_found', `no model file ${bad}`, { field: 'name' });
      const missing = () =>
        new DomainError('not_found', `no model file "${echo(name)}" in --models-dir (${root}): copy it there, or fix the catalog's llmgw:// source`, {
          field: 'name',
        });
      const real = await fileInside(root, name);
      if (real === undefined) throw missing();
      const realRoot = await fs.realpath(root);
      res.sendFile(
        path.relative(realRoot, real),
        { root: realRoot, dotfiles: 'deny', acceptRanges: true, lastModified: true, cacheControl: false },
        (err?: Error & { status?: number; code?: string; headers?: Record<string, string> }) => {
          if (!err) return;
          // Once bytes went out the transfer is the agent's to resume; nothing can be said now.
          if (res.headersSent) return;
          if (err.status === 416) {
            // `bytes */SIZE` tells a resuming agent how long the file really is.
            const range = err.headers?.['Content-Range'];
            if (range) res.setHeader('Content-Range', range);
            return next(
              new DomainError(
                'range_not_satisfiable',
                `the Range asked for starts past the end of "${echo(name)}" (${range ?? 'size unknown'}): fetch it again from the start`,
                { field: 'range' },
              ),
            );
          }
          if (err.status === 404 || err.code === 'ENOENT' || err.code === 'EISDIR' || err.code === 'ENOTDIR') return next(missing());
          next(new DomainError('internal', `cannot read model file "${echo(name)}" in --models-dir: ${err.message}`));
        },
      );
    })
    .all(methodNotAllowed);
  return r;
}
