import type { Server } from 'node:http';
import { createEngineHttp } from '@llmgw/engine-http';
import { LlamaBackend } from './backend.js';
import type { EngineCounters } from './backend.js';
import type { ModelRuntime } from './runtime.js';

export interface EngineServerOptions {
  servedName: string;
  apiKey: string | null;
  /** Highest valid token id + 1, to refuse token-id prompts llama.cpp would crash on. */
  vocabSize: number | null;
  /** One line per request and per notable event. */
  log(line: string): void;
}

export interface EngineServer {
  server: Server;
  /** The model is loaded: /health turns 200 and /v1/* start answering. */
  setBackend(runtime: ModelRuntime): void;
}

/** A Prometheus counter/gauge line pair. */
function metric(name: string, type: 'counter' | 'gauge', help: string, value: number): string {
  return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`;
}

/**
 * node-llama-cpp-engine's HTTP side: the shared OpenAI layer in front of a
 * {@link LlamaBackend}, listening before the model is loaded (503 until then), plus
 * /metrics under llama-server's metric names so dashboards written for it work unchanged.
 */
export function createEngineServer(options: EngineServerOptions): EngineServer {
  const counters: EngineCounters = { promptTokens: 0, predictedTokens: 0, cancelled: 0 };
  let runtime: ModelRuntime | null = null;
  const metrics = (): string => {
    const load = runtime?.activity() ?? { processing: 0, queued: 0 };
    const loras = runtime?.adapters() ?? { loaded: [], loads: 0, unloads: 0 };
    return (
      metric('llamacpp:prompt_tokens_total', 'counter', 'Prompt tokens processed.', counters.promptTokens) +
      metric('llamacpp:tokens_predicted_total', 'counter', 'Tokens generated.', counters.predictedTokens) +
      metric('llamacpp:requests_processing', 'gauge', 'Requests generating now.', load.processing) +
      metric('llamacpp:requests_deferred', 'gauge', 'Requests waiting for a free sequence.', load.queued) +
      metric('llmgw_engine_requests_cancelled_total', 'counter', 'Generations stopped because the client disconnected.', counters.cancelled) +
      metric('llmgw_engine_lora_loaded', 'gauge', 'LoRA adapters loaded now (each in its own context).', loras.loaded.length) +
      metric('llmgw_engine_lora_loads_total', 'counter', 'LoRA adapter loads (a first request, or one after an unload).', loras.loads) +
      metric('llmgw_engine_lora_unloads_total', 'counter', 'LoRA adapters unloaded to make room (least recently used first).', loras.unloads)
    );
  };
  const http = createEngineHttp({
    program: 'node-llama-cpp-engine',
    servedName: options.servedName,
    apiKey: options.apiKey,
    log: (line) => options.log(line),
    metrics,
  });
  return {
    server: http.server,
    setBackend: (loaded) => {
      runtime = loaded;
      http.setBackend(new LlamaBackend(loaded, options, counters));
    },
  };
}
