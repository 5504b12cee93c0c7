export { estimateForSource } from './estimate.js';
export type { SourceEstimate, SourceEstimateOptions } from './estimate.js';
export { DEFAULT_CONTEXT_SIZE, DEFAULT_PARALLEL, parseEngineArgs, sizingFromArgs } from './options.js';
export type { NodeLlamaCppOptions } from './options.js';
export { availableCores, defaultThreads } from './cores.js';
