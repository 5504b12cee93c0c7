import { Type, type Static } from '@sinclair/typebox';

/**
 * The catalog file: which models should run, and the ways (profiles) each can run.
 * Unknown keys are errors here, unlike on the wire: a misspelt `min_memroy_gb` must not
 * silently become "no requirement".
 */

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9][A-Za-z0-9._:/-]*$' });
const NonNeg = Type.Integer({ minimum: 0 });

export const Engines = ['vllm', 'sglang', 'llama.cpp', 'node-llama-cpp', 'command'] as const;
export type EngineName = (typeof Engines)[number];

/** A SHA-256 digest as 64 hex digits, as `sha256sum` prints it. */
const Sha256 = Type.String({ pattern: '^[0-9a-fA-F]{64}$', failMessage: 'must be a SHA-256 digest: 64 hex digits, as sha256sum prints it' });

/**
 * How the gateway picks a replica of a model for each request: `cache-aware` prefers
 * replicas predicted to hold the prompt's prefix in their KV cache, until their
 * estimated wait exceeds the others' by a budget; `least-loaded` takes the replica with
 * the fewest requests in flight. See packages/server/src/gateway/README.md.
 */
export const RoutingPolicies = ['cache-aware', 'least-loaded'] as const;
export type RoutingPolicy = (typeof RoutingPolicies)[number];
/**
 * How a model with LoRA adapters picks among its replicas for an adapter's request:
 * `affinity` (the default) prefers a replica holding the adapter, then a free adapter
 * slot, then the oldest slot, and the model's `routing` chooses within that; `none`
 * leaves it to `routing` alone, adapters ignored (a baseline for benchmarks, or for an
 * engine whose adapters are all loaded at once). Loads are counted either way.
 */
export const AdapterRoutings = ['affinity', 'none'] as const;
export type AdapterRouting = (typeof AdapterRoutings)[number];
/** A model without `routing:` routes cache-aware. */
export const DEFAULT_ROUTING: RoutingPolicy = 'cache-aware';

export const ProfileSchema = Type.Object(
  {
    name: Name,
    engine: Type.Union(Engines.map((e) => Type.Literal(e))),
    /** GPUs per shard; 0 means a CPU profile. */
    gpus: Type.Optional(NonNeg),
    /** Accepted GPU classes; a class matches by prefix, so `H100` accepts `H100-80GB`. */
    gpu_class: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    /** Memory each GPU must have, in GiB (2^30 bytes, as nvidia-smi's MiB figures add up). */
    min_gpu_memory_gb: Type.Optional(Type.Number({ minimum: 0 })),
    /** Host RAM the replica needs on each node, in GiB; reserved while it is placed there. */
    min_memory_gb: Type.Optional(Type.Number({ minimum: 0 })),
    /** CPU cores each node must have (not reserved: a node's cores are shared). */
    min_cpu_cores: Type.Optional(Type.Integer({ minimum: 1 })),
    shards: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
    fabric: Type.Optional(Type.String({ minLength: 1 })),
    node_selector: Type.Optional(Type.Record(Type.String(), Type.String())),
    args: Type.Optional(Type.Array(Type.String())),
    env: Type.Optional(Type.Record(Type.String(), Type.String())),
    source: Type.Optional(Type.String({ minLength: 1 })),
    /**
     * SHA-256 (64 hex digits) of the file `source` names; required for an http(s):// or
     * llmgw:// source, which agents fetch and must verify before an engine reads it.
     */
    sha256: Type.Optional(Sha256),
    /**
     * The size in bytes of the file `source` names, when known: an agent refuses a file
     * server that declares another length, reads no more than this, and fails the replica
     * at once when it cannot fit in its model cache.
     */
    size_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    /** argv template for `engine: command`, with placeholders such as `{port}`. */
    command: Type.Optional(Type.Array(Type.String(), { minItems: 1 })),
    startup_timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    /** LoRA adapters one replica of this profile holds loaded at once (default `DEFAULT_MAX_LOADED_ADAPTERS`). */
    max_loaded_adapters: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    /**
     * Whether the engine serves the OpenAI Responses API (`/v1/responses`) itself: the
     * gateway then passes such requests through instead of translating them to chat
     * completions. Default: true for vllm, false for the others.
     */
    responses_api: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type Profile = Static<typeof ProfileSchema>;

/** Adapters a replica holds loaded at once when its profile does not say (vLLM's `--max-loras`, per replica). */
export const DEFAULT_MAX_LOADED_ADAPTERS = 8;

/**
 * A LoRA adapter of a model (issue 31): clients name it as a model (`"model": "sql-lora"`)
 * and a replica of its base serves it with the adapter loaded. Its `source` is fetched,
 * verified and cached like a model file: a path on the nodes, an `llmgw://` file or a URL,
 * the last two with their `sha256`.
 */
export const AdapterSchema = Type.Object(
  {
    name: Name,
    source: Type.String({ minLength: 1 }),
    sha256: Type.Optional(Sha256),
  },
  { additionalProperties: false },
);
export type Adapter = Static<typeof AdapterSchema>;

/**
 * How a model's replicas move to a new revision: start-before-stop, like a drain.
 * Defaults in `ROLLOUT_DEFAULTS`.
 */
export const RolloutSchema = Type.Object(
  {
    /** Replicas of the new revision that may be starting at once beyond the old ones (default 1). */
    max_surge: Type.Optional(NonNeg),
    /** Replicas that may be out of service at once when no node has room for a surge one (default 0). */
    max_unavailable: Type.Optional(NonNeg),
    /** A new replica not ready this long halts the rollout (default 600). */
    progress_deadline_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    /** Pause once this many replicas run the new revision (a canary), until `ctl rollout resume`. */
    pause_after: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);
export type RolloutSettings = Static<typeof RolloutSchema>;
export const ROLLOUT_DEFAULTS = { max_surge: 1, max_unavailable: 0, progress_deadline_s: 600 } as const;

export const ModelSchema = Type.Object(
  {
    name: Name,
    aliases: Type.Optional(Type.Array(Name)),
    source: Type.String({ minLength: 1 }),
    /**
     * SHA-256 (64 hex digits) of the file `source` names; required for an http(s):// or
     * llmgw:// source, which agents fetch and must verify before an engine reads it.
     */
    sha256: Type.Optional(Sha256),
    /**
     * The size in bytes of the file `source` names, when known: an agent refuses a file
     * server that declares another length, reads no more than this, and fails the replica
     * at once when it cannot fit in its model cache.
     */
    size_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    scaling: Type.Optional(
      Type.Object(
        {
          min: NonNeg,
          max: NonNeg,
          /** In-flight requests per replica the autoscaler aims for (default 4). */
          target_in_flight: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
          /** Load must stay low this long before a replica is removed (default 300). */
          scale_down_delay_s: Type.Optional(Type.Number({ minimum: 0 })),
          /** With min 0: no requests this long and the model goes to zero replicas (default 600). */
          idle_timeout_s: Type.Optional(Type.Number({ minimum: 0 })),
        },
        { additionalProperties: false },
      ),
    ),
    fallbacks: Type.Optional(Type.Array(Name)),
    /** The routing policy (`RoutingPolicies`); `cache-aware` when absent. */
    routing: Type.Optional(Type.Union(RoutingPolicies.map((r) => Type.Literal(r)))),
    profiles: Type.Array(ProfileSchema, { minItems: 1 }),
    /** How a change of what the replicas run (a new revision) replaces them; see `RolloutSettings`. */
    rollout: Type.Optional(RolloutSchema),
    /** LoRA adapters served on this model's replicas, each a model name for clients. */
    adapters: Type.Optional(Type.Array(AdapterSchema, { maxItems: 1024 })),
    /** Routing by adapter (`AdapterRoutings`); `affinity` when absent. Only with `adapters`. */
    adapter_routing: Type.Optional(Type.Union(AdapterRoutings.map((r) => Type.Literal(r)))),
  },
  { additionalProperties: false },
);
export type Model = Static<typeof ModelSchema>;

export const CatalogSchema = Type.Object({ models: Type.Array(ModelSchema) }, { additionalProperties: false });
export type Catalog = Static<typeof CatalogSchema>;
