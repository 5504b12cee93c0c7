import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { workingSet } from './estimate.js';
import type { WorkingSet } from './estimate.js';
import { readGgufHeader } from './header.js';
import type { GgufHeader } from './header.js';

// The built-in engine's sizing defaults live here, not in @llmgw/engine-llama, so that an
// agent can estimate a GGUF for the server on a node that does not install the engine.

/** Parallel sequences of node-llama-cpp-engine when --parallel is not given. */
export const DEFAULT_PARALLEL = 2;

/**
 * Context per sequence of node-llama-cpp-engine when --context-size is not given (capped
 * at the model's trained context). Small on purpose: the KV cache is per sequence, and a
 * CPU node asked to run a 128k-context model at full length would spend gigabytes before
 * any request.
 */
export const DEFAULT_CONTEXT_SIZE = 1024;

/** A GGUF's memory estimate for running it under node-llama-cpp-engine. */
export interface SourceEstimate extends WorkingSet {
  /** The header, with size and parameter count summed over all parts of a split model. */
  header: GgufHeader;
}

export interface SourceEstimateOptions {
  /** The engine's --context-size; default as the engine defaults it. */
  contextSize?: number;
  /** The engine's --parallel; default {@link DEFAULT_PARALLEL}. */
  parallel?: number;
}

const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** Sums the other parts of a split model (`name-00001-of-00003.gguf`) into the first's header. */
async function withSplitParts(file: string, first: GgufHeader): Promise<GgufHeader> {
  const count = first.metadata['split.count'];
  const match = SPLIT_NAME.exec(path.basename(file));
  if (typeof count !== 'number' || count <= 1 || match === null) return first;
  const dir = path.dirname(file);
  const names = new Set(await readdir(dir));
  let fileSizeBytes = first.fileSizeBytes;
  let parameterCount = first.parameterCount;
  for (let i = 2; i <= count; i++) {
    const name = `${match[1]}-${String(i).padStart(5, '0')}-of-${match[3]}.gguf`;
    if (!names.has(name)) throw new Error(`split model part ${name} is missing`);
    const part = await readGgufHeader(path.join(dir, name));
    fileSizeBytes += part.fileSizeBytes;
    parameterCount += part.parameterCount;
  }
  return { ...first, fileSizeBytes, parameterCount };
}

/**
 * The working set of serving the GGUF at `file` with node-llama-cpp-engine: weights +
 * KV cache for `parallel` sequences plus the embedding context's one, at the context
 * the engine would use (its default unless given) + overhead; see {@link workingSet}.
 * Undefined when the file is missing, unreadable or not a complete GGUF, so a caller
 * can fall back to what the profile states.
 */
export async function estimateForSource(file: string, options: SourceEstimateOptions = {}): Promise<SourceEstimate | undefined> {
  let header: GgufHeader;
  try {
    header = await withSplitParts(file, await readGgufHeader(file));
  } catch {
    return undefined;
  }
  return estimateForHeader(header, options);
}

/**
 * {@link estimateForSource} for a header read some other way (over HTTP with a Range
 * request, by the server, for a source agents fetch): the same engine defaults.
 */
export function estimateForHeader(header: GgufHeader, options: SourceEstimateOptions = {}): SourceEstimate {
  const trained = header.contextLength ?? DEFAULT_CONTEXT_SIZE;
  const contextLength = options.contextSize ?? Math.min(DEFAULT_CONTEXT_SIZE, trained);
  const sequences = (options.parallel ?? DEFAULT_PARALLEL) + 1;
  return { header, ...workingSet(header, { contextLength, sequences }) };
}
