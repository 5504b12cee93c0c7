/**
 * What waits on a client leaving reads of it: flow control's queue, a cold start, the
 * stream relay, and undici's request to the engine, which aborts it. The part of
 * `AbortSignal` they use, so a real one (tests) serves as well.
 */
export interface LeaveSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Says once that the client of one request left. Made for every request, so it is an
 * array of listeners rather than an AbortController: the controller, its EventTarget and
 * undici's listener on it cost about 15 µs of every request's CPU on the gateway bench
 * (bench/gateway.bench.mjs, a profile under load). Like an AbortSignal, a listener added
 * after the client left is never called, and each is called at most once.
 */
export class ClientLeft implements LeaveSignal {
  aborted = false;
  private listeners: (() => void)[] | undefined;

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners?.indexOf(listener) ?? -1;
    if (i >= 0) this.listeners!.splice(i, 1);
  }

  /** The client left: tells every listener, once. */
  leave(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = undefined;
    for (const l of listeners ?? []) {
      // As an EventTarget does: one listener that throws does not keep the rest from hearing it.
      try {
        l();
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
