import type { RouteTarget } from '../controller/controller.js';
import type { ClientRequest } from './request.js';

/**
 * How a request for a LoRA adapter reaches each engine (issue 31). vLLM, SGLang, the
 * built-in and the test engine take the adapter's name as the model, which `bodyFor`
 * already puts there. llama-server has no names for adapters: it loads every `--lora`
 * at start (at scale 0, `--lora-init-without-apply`) and a request applies one by its
 * index in that order, with `lora: [{id, scale}]` (adapters left out get scale 0). The
 * index comes from the replica's spec (`RouteTarget.adapters`), the list the agent built
 * the engine's argv from, so the two cannot disagree.
 */

/** Engines that pick an adapter by its index in their `--lora` list, per request. */
const BY_INDEX: ReadonlySet<string> = new Set(['llama.cpp']);

/**
 * Whether `target` can serve `adapter`: a replica whose spec does not list it (one of a
 * revision from before the adapter was added) cannot, whatever its engine. A target that
 * does not say (no spec) is taken to.
 */
export function servesAdapter(target: RouteTarget, adapter: string | undefined): boolean {
  return adapter === undefined || target.adapters === undefined || target.adapters.includes(adapter);
}

/**
 * The body for `target`: `payload` as is, except for an adapter on an engine that selects
 * adapters by index, where `model` is the base (the name the engine serves) and `lora`
 * applies that adapter alone at scale 1.
 */
export function payloadFor(r: ClientRequest, model: string, target: RouteTarget, payload: Buffer | string): Buffer | string {
  const adapter = model === r.model.name ? r.adapter : undefined;
  if (adapter === undefined || target.engine === undefined || !BY_INDEX.has(target.engine)) return payload;
  const id = target.adapters?.indexOf(adapter) ?? -1;
  // Not routed there (`servesAdapter`); sent as is, the engine answers for it.
  if (id < 0) return payload;
  const body: Record<string, unknown> = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8')) as Record<string, unknown>;
  return JSON.stringify({ ...body, model, lora: [{ id, scale: 1 }] });
}
