import type { EngineName } from './catalog.js';

/**
 * Which environment variables a catalog profile may give an engine. A variable is
 * configuration only when it cannot make the engine load code of someone else's
 * choosing: `NODE_OPTIONS=--import=data:…`, `LD_PRELOAD`, `PYTHONPATH` and the like run
 * arbitrary code as the engine's user on a node that never allowed command engines.
 * So the rule is an allow-list per engine kind, with the variables that load code
 * refused even where a pattern would admit them. `engine: command` runs any argv
 * anyway, so its profiles may set anything (on nodes that allow command engines).
 */

/** Variables that load code or change the loader: refused for every engine but `command`. */
const LOADS_CODE: readonly RegExp[] = [
  /^LD_/, // LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT: the dynamic loader
  /^DYLD_/,
  /^NODE_OPTIONS$/, // --require/--import
  /^NODE_PATH$/,
  /^PYTHON/, // PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE
  /^PERL5(LIB|OPT)$/,
  /^RUBYOPT$/,
  /^BASH_ENV$/,
  /^ENV$/,
  /^PATH$/, // engines start helpers by name (vLLM's workers, Triton's compiler)
  /^GCONV_PATH$/,
  /^CUDA_INJECTION(32|64)_PATH$/,
  /^NCCL_(NET|TUNER|PROFILER)_PLUGIN$/,
  /^VLLM_PLUGINS$/,
  /^TORCHINDUCTOR_/,
  /^TRITON_(LIBCUDA_PATH|PTXAS_PATH|CUOBJDUMP_PATH|NVDISASM_PATH)$/,
];

/** What every engine may be given: GPUs, collectives, caches, threads, locale, proxies. */
const COMMON: readonly RegExp[] = [
  /^CUDA_/,
  /^NCCL_/,
  /^NVIDIA_/,
  /^HF_/,
  /^HUGGING_FACE_/,
  /^TRANSFORMERS_/,
  /^TOKENIZERS_PARALLELISM$/,
  /^(OMP|MKL|OPENBLAS)_/,
  /^(TZ|LANG|LANGUAGE|TMPDIR|XDG_CACHE_HOME)$/,
  /^LC_/,
  /^(HTTP|HTTPS|NO)_PROXY$/i,
];

const PYTORCH: readonly RegExp[] = [/^PYTORCH_/, /^TORCH_/, /^TRITON_/];

/** Per engine kind, beside `COMMON`: each engine's own documented variables. */
const BY_ENGINE: Record<Exclude<EngineName, 'command'>, readonly RegExp[]> = {
  vllm: [/^VLLM_/, ...PYTORCH],
  sglang: [/^SGLANG_/, /^FLASHINFER_/, ...PYTORCH],
  'llama.cpp': [/^LLAMA_/, /^GGML_/],
  'node-llama-cpp': [/^NODE_LLAMA_CPP_/, /^GGML_/, /^UV_THREADPOOL_SIZE$/],
};

/** A few allowed patterns, for the message that says what is allowed. */
const EXAMPLES: Record<Exclude<EngineName, 'command'>, string> = {
  vllm: 'VLLM_*, CUDA_*, NCCL_*, HF_*, PYTORCH_*, TORCH_*, OMP_*',
  sglang: 'SGLANG_*, FLASHINFER_*, CUDA_*, NCCL_*, HF_*, PYTORCH_*, OMP_*',
  'llama.cpp': 'LLAMA_*, GGML_*, CUDA_*, HF_*, OMP_*',
  'node-llama-cpp': 'NODE_LLAMA_CPP_*, GGML_*, CUDA_*, OMP_*, UV_THREADPOOL_SIZE',
};

/**
 * Why `name` may not be in a profile's `env` for `engine`, or undefined when it may. The
 * catalog refuses such a profile at load, naming the field; an agent refuses to start it
 * too (unless it allows command engines), so an older server cannot slip one through.
 */
export function engineEnvRefusal(engine: string, name: string): string | undefined {
  if (engine === 'command') return undefined;
  const own = (BY_ENGINE as Record<string, readonly RegExp[] | undefined>)[engine];
  if (!own) return undefined;
  if (LOADS_CODE.some((re) => re.test(name))) {
    return `loads code into the engine (as ${name} does), which only engine: command may do, on nodes started with --allow-command-engine`;
  }
  if (COMMON.some((re) => re.test(name)) || own.some((re) => re.test(name))) return undefined;
  return `is not a variable llmgw passes to ${engine} engines (allowed: ${EXAMPLES[engine as keyof typeof EXAMPLES]}, and the like); use engine: command for anything else`;
}
