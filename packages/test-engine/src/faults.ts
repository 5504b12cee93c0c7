/**
 * The fault mode (`--fault KIND`): replies an engine must not be trusted on, for the
 * gateway's hostile-input tests. Each kind changes chat completions only.
 */
export const FAULTS = ['usage-negative', 'usage-string', 'usage-huge', 'usage-nonfinite', 'oversized-event', 'stall', 'garbage'] as const;
export type Fault = (typeof FAULTS)[number];

/** What each usage fault puts in both token counts, as JSON text (1e999 parses as Infinity). */
export const BAD_USAGE: Partial<Record<Fault, string>> = {
  'usage-negative': '-1',
  'usage-string': '"0abc"',
  'usage-huge': '1e20',
  'usage-nonfinite': '1e999',
};

/** Stands for the usage in a reply until the bad text replaces it. */
export const USAGE_SENTINEL = '__llmgw_fault_usage__';

/** `json` (which holds the sentinel as its usage) with the fault's usage text in its place. */
export function withBadUsage(json: string, fault: Fault): string {
  const v = BAD_USAGE[fault] ?? '0';
  return json.replace(`"${USAGE_SENTINEL}"`, `{"prompt_tokens":${v},"completion_tokens":${v},"total_tokens":${v}}`);
}

/** Not SSE, or SSE that says nothing sensible: sent before the real tokens by `garbage`. */
export const GARBAGE_EVENTS = [
  'data: {not json\n\n',
  'event: surprise\nid: 7\n\n',
  ': a comment\n\n',
  'data: {"choices":[],"usage":\n\n',
  'data: {"choices":null,"usage":{"prompt_tokens":"x"}}\n\n',
  '\u0000\u00ff\ufffd garbage\n\n',
  'data: [DONE]\n\n',
];

/** A non-streamed reply from `garbage`: a 200 that is not JSON. */
export const GARBAGE_BODY = '{"id": "chatcmpl-1", "choices": [ \u0000 oops';
