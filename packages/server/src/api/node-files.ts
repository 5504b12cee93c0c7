import express, { type Router } from 'express';
import type { NodeFileView } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { echo, notFound } from '../errors.js';
import { methodNotAllowed } from '../http/http.js';

/**
 * The model files in each node's cache as its agent last reported them
 * (`NodeReport.files`), by node id then least recently used first: the order the
 * agent evicts them in, so the first rows of a node are what goes next.
 */
export function nodeFileViews(ctl: Controller, nodeId?: string): NodeFileView[] {
  const out: NodeFileView[] = [];
  for (const n of ctl.inventory.list()) {
    if (nodeId !== undefined && n.id !== nodeId) continue;
    const files = [...(n.report?.files ?? [])].sort((a, b) => a.last_used_ms - b.last_used_ms || a.sha256.localeCompare(b.sha256));
    for (const f of files) {
      out.push({
        node: n.id,
        sha256: f.sha256,
        source: f.source,
        size_bytes: f.size_bytes,
        last_used: new Date(f.last_used_ms).toISOString(),
        in_use: f.in_use,
      });
    }
  }
  return out;
}

/** `GET /api/v1/files[?node=ID]` (admin and viewer tokens): what `ctl files` lists. */
export function nodeFilesApi(ctl: Controller): Router {
  const r = express.Router();
  r.route('/files')
    .get((req, res) => {
      const node = typeof req.query.node === 'string' && req.query.node !== '' ? req.query.node : undefined;
      if (node !== undefined && !ctl.inventory.get(node)) throw notFound(`no node "${echo(node)}" (see ctl nodes)`);
      res.json(nodeFileViews(ctl, node));
    })
    .all(methodNotAllowed);
  return r;
}
