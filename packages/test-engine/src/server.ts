import { createEngineHttp } from '@llmgw/engine-http';
import type { EngineHttp } from '@llmgw/engine-http';
import { ScriptedBackend } from './backend.js';
import type { EngineHooks } from './backend.js';
import type { EngineOptions } from './options.js';

export type { EngineHooks } from './backend.js';

export interface EngineServer extends Pick<EngineHttp, 'server' | 'isLoaded'> {
  /** Ends the simulated model load: /health turns 200 and /v1/* start answering. */
  markLoaded(): void;
}

/** The test engine: the shared OpenAI HTTP layer in front of the {@link ScriptedBackend}. */
export function createEngineServer(options: EngineOptions, hooks: EngineHooks): EngineServer {
  const http = createEngineHttp({
    program: 'llmgw-test-engine',
    servedName: options.model,
    apiKey: options.apiKey,
    log: (line) => hooks.log(line),
    // Tests and the gateway's journeys read this to see which engine answered.
    headers: { 'x-test-engine-model': options.model },
    logProbes: true,
    // With adapters, /metrics says what the slots did: the gateway's adapter routing is checked against it.
    ...(options.loras.length > 0 ? { metrics: () => backend.adapters.metrics() } : {}),
  });
  const backend: ScriptedBackend = new ScriptedBackend(options, hooks);
  return { server: http.server, isLoaded: () => http.isLoaded(), markLoaded: () => http.setBackend(backend) };
}
