import type { Llama, LlamaGrammar, LlamaModel, Token, TokenBias } from 'node-llama-cpp';
import { EngineError } from '@llmgw/engine-http';
import type { OutputGrammar, Sampling } from './features.js';

/** The grammar a request's output must follow, as node-llama-cpp builds it; a schema it cannot take is a 400 naming its field. */
export async function outputGrammar(llama: Llama, g: OutputGrammar | undefined): Promise<LlamaGrammar | undefined> {
  if (g === undefined) return undefined;
  if (g.kind === 'json') return llama.getGrammarFor('json');
  try {
    // The schema is the client's: node-llama-cpp checks it at run time (its type is a compile-time subset).
    return await llama.createGrammarForJsonSchema(g.schema as never);
  } catch (e) {
    throw new EngineError('unsupported_value', `${g.param}: this JSON schema is not supported by node-llama-cpp's grammars: ${(e as Error).message}`, {
      param: g.param,
    });
  }
}

/** `logit_bias` as node-llama-cpp's token bias: -100 bans a token, other values are added to its logit. */
export async function tokenBiasOf(model: LlamaModel, sampling: Sampling): Promise<TokenBias | undefined> {
  if (sampling.logitBias === undefined) return undefined;
  // Imported lazily, as the runtime imports node-llama-cpp (the module is loaded by then).
  const { TokenBias } = await import('node-llama-cpp');
  const bias = new TokenBias(model.tokenizer);
  for (const [token, value] of sampling.logitBias) bias.set(token as Token, value <= -100 ? 'never' : { logit: value });
  return bias;
}
