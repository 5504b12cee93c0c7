import { DomainError } from '../errors.js';

/**
 * The bytes of non-streamed engine replies held in memory at once, across every request
 * (`--reply-buffer`). Each such reply is read whole before it is sent on (to check its
 * size and read its usage), so without a shared bound twenty engines sending 64 MiB each
 * hold 1.3 GB and the event loop spends its time copying them. A reply takes its bytes
 * from here as they arrive, or all at once when its `Content-Length` says how many; one
 * that cannot get them is refused with 503 `overloaded` before more is buffered.
 */
export class ReplyBudget {
  private used = 0;

  constructor(readonly limitBytes: number) {}

  /** Bytes held now (replies being read or still being written to their client). */
  get inUse(): number {
    return this.used;
  }

  /** A hold of no bytes yet, grown with `take` and given back, once, with `release`. */
  hold(): ReplyHold {
    let held = 0;
    return {
      take: (n) => {
        if (this.used + n > this.limitBytes) return false;
        this.used += n;
        held += n;
        return true;
      },
      release: () => {
        this.used -= held;
        held = 0;
      },
    };
  }
}

/** One reply's share of the {@link ReplyBudget}. */
export interface ReplyHold {
  /** Takes `n` more bytes; false (and nothing taken) when the budget has not that many left. */
  take(n: number): boolean;
  /** Gives back every byte taken; safe to call more than once. */
  release(): void;
}

/** The 503 of a reply that does not fit in what is left of the budget. */
export function overBudget(budget: ReplyBudget): DomainError {
  return new DomainError(
    'overloaded',
    `the gateway is holding ${budget.limitBytes} bytes of engine replies already (--reply-buffer); retry shortly, or stream the reply`,
    { retryAfterS: 1 },
  );
}
