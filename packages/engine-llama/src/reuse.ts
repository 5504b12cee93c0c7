/**
 * How much of a prompt must already sit in a slot's KV cache for the prompt to take that
 * slot: llama-server's `--slot-prompt-similarity` default (0.10). Below it the shared
 * part is only the chat template's opening tokens, and taking that slot would throw away
 * a conversation another request may come back to for a gain of a few tokens.
 */
export const SLOT_PROMPT_SIMILARITY = 0.1;

/**
 * Which free slot a prompt gets, given each free slot's common prefix with it in tokens
 * (free slots least recently released first): the longest common prefix, when it is at
 * least {@link SLOT_PROMPT_SIMILARITY} of the prompt; otherwise the least recently used
 * slot, whose cache is the least likely to be asked for again (as llama-server does).
 * Ties also go to the least recently used.
 */
export function chooseSlot(commonPrefixes: readonly number[], promptTokens: number): number {
  let best = 0;
  let longest = 0;
  for (const [i, common] of commonPrefixes.entries()) {
    if (common > longest) {
      best = i;
      longest = common;
    }
  }
  return longest > 0 && longest >= SLOT_PROMPT_SIMILARITY * promptTokens ? best : 0;
}

/**
 * Prompt tokens llama.cpp will not evaluate again: the common prefix with the slot's
 * cache, less the last prompt token, which is always evaluated (it yields the first
 * output token; node-llama-cpp re-evaluates it even for an identical prompt).
 */
export function reusedTokens(commonPrefix: number, promptTokens: number): number {
  return Math.max(0, Math.min(commonPrefix, promptTokens - 1));
}
