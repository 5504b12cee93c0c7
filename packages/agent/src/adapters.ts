import fs from 'node:fs';
import path from 'node:path';
import type { AssignedAdapter, ShardAssignment } from '@llmgw/shared';

/** The ranks vLLM accepts for `--max-lora-rank` (vllm/config/lora.py). */
const VLLM_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;

/**
 * The rank of a PEFT adapter folder (`r` in its `adapter_config.json`), for vLLM's
 * `--max-lora-rank`; undefined when the source is not such a folder on this node.
 */
export function peftRank(source: string, read = (p: string) => fs.readFileSync(p, 'utf8')): number | undefined {
  try {
    const r = (JSON.parse(read(path.join(source, 'adapter_config.json'))) as { r?: unknown }).r;
    return typeof r === 'number' && Number.isInteger(r) && r > 0 ? r : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The flags that make an engine serve `a`'s LoRA adapters, each under its name (issue 31).
 * Every adapter is given at start, and the engine keeps at most `max_loaded_adapters`
 * loaded, swapping the least recently used: vLLM holds the others in CPU memory
 * (`--max-cpu-loras`), so the agent never needs vLLM's runtime-update endpoints and the
 * `VLLM_ALLOW_RUNTIME_LORA_UPDATING` its docs call risky; SGLang likewise with
 * `--lora-paths` and `--max-loras-per-batch`; llama-server loads each `--lora` at scale 0
 * (`--lora-init-without-apply`) and a request picks its adapter by id, in the order given
 * here. `rankOf` reads an adapter's rank for vLLM (default 16, vLLM's own).
 */
export function adapterArgs(engine: string, a: ShardAssignment, rankOf: (source: string) => number | undefined = peftRank): string[] {
  const adapters: readonly AssignedAdapter[] = a.adapters ?? [];
  if (adapters.length === 0) return [];
  const slots = Math.min(a.max_loaded_adapters ?? adapters.length, adapters.length);
  const named = adapters.map((x) => `${x.name}=${x.source}`);
  switch (engine) {
    case 'vllm': {
      const rank = Math.max(16, ...adapters.map((x) => rankOf(x.source) ?? 0));
      const maxRank = VLLM_RANKS.find((r) => r >= rank) ?? rank;
      return [
        '--enable-lora',
        '--max-loras',
        String(slots),
        '--max-cpu-loras',
        String(adapters.length),
        '--max-lora-rank',
        String(maxRank),
        '--lora-modules',
        ...named,
      ];
    }
    case 'sglang':
      return ['--enable-lora', '--max-loras-per-batch', String(slots), '--lora-paths', ...named];
    case 'llama.cpp':
      return ['--lora-init-without-apply', ...adapters.flatMap((x) => ['--lora', x.source])];
    case 'node-llama-cpp':
      return ['--max-loras', String(slots), ...adapters.flatMap((x) => ['--lora', `${x.name}=${x.source}`])];
    default:
      return [];
  }
}

/** `{adapters}` in a command template: `name=path` pairs, comma-joined (the test engine's `--lora`). */
export function adapterList(a: ShardAssignment): string {
  return (a.adapters ?? []).map((x) => `${x.name}=${x.source}`).join(',');
}
