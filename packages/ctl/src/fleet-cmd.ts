import type { CatalogStatusView, ExplainView, ModelView, NodeView, ReplicaView } from '@llmgw/shared';
import { call, callAll, type Connection } from './client.js';
import { CtlError } from './failure.js';
import { catalogNotice, modelsJson } from './catalog-status.js';
import { colours } from './render.js';
import { adaptersTable, explainText, modelsTable, nodeDetails, nodesTable, replicaErrors, replicasTable } from './tables.js';

/**
 * What `ctl nodes`, `models`, `replicas` and `explain` do, loaded by cli.ts only when one
 * of them runs: with the tables, chalk and cli-table3, which no other command's start
 * needs (issue 32). Their names, flags and help stay in cli.ts.
 */
export interface FleetIo {
  globals(): { conn: Connection; json: boolean; wide: boolean };
  print(text: string): void;
  printJson(v: unknown): void;
}

export async function nodes(io: FleetIo): Promise<void> {
  const { conn, json } = io.globals();
  // Every page (the server pages the list: issue 27).
  const all = await callAll<NodeView>(conn, '/nodes');
  if (json) return io.printJson(all);
  const c = colours();
  io.print(nodesTable(all, c));
  const details = nodeDetails(all);
  if (details) io.print(`\n${details}`);
}

export async function models(io: FleetIo, name: string | undefined): Promise<void> {
  const { conn, json, wide } = io.globals();
  const all = await call<ModelView[]>(conn, 'GET', '/models');
  const shown = name === undefined ? all : all.filter((m) => m.name === name || m.aliases.includes(name));
  if (name !== undefined && shown.length === 0) throw new CtlError(`model "${name}" is not in the catalog (see ctl models)`);
  const status = await call<CatalogStatusView>(conn, 'GET', '/catalog');
  if (json) {
    const out = modelsJson(shown, status);
    return io.printJson(name === undefined ? out : out[0]);
  }
  const c = colours();
  io.print(catalogNotice(status, c));
  io.print(modelsTable(shown, c));
  const adapters = name !== undefined || wide ? adaptersTable(shown) : '';
  if (adapters) io.print(`\n${adapters}`);
  const short = shown.filter((m) => m.placement_summary);
  if (short.length) io.print(`\n${short.map((m) => `${m.name}: ${m.placement_summary} (ctl explain ${m.name})`).join('\n')}`);
}

export async function replicas(io: FleetIo, o: { model?: string; showKeys?: boolean }): Promise<void> {
  const { conn, json, wide } = io.globals();
  const params = new URLSearchParams();
  if (o.model) params.set('model', o.model);
  if (o.showKeys) params.set('show_keys', 'true');
  const q = params.size ? `?${params}` : '';
  const all = await call<ReplicaView[]>(conn, 'GET', `/replicas${q}`);
  if (json) return io.printJson(all);
  io.print(replicasTable(all, colours(), wide));
  const errors = replicaErrors(all);
  if (errors) io.print(`\n${errors}`);
  if (o.showKeys) io.print(`\n${all.map((r) => `${r.id}: ${r.api_key ?? '-'}`).join('\n')}`);
}

export async function explain(io: FleetIo, model: string): Promise<void> {
  const { conn, json } = io.globals();
  const v = await call<ExplainView>(conn, 'GET', `/explain-placement?model=${encodeURIComponent(model)}`);
  if (json) return io.printJson(v);
  io.print(explainText(v, colours()));
}
