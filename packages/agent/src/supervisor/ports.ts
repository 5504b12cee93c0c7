import net from 'node:net';

/** Anything that holds a port; the pool writes `port` as it tries one. */
export interface PortHolder {
  port?: number;
}

/** Whether `port` can be listened on at `host` right now. */
export type BindCheck = (port: number, host: string) => Promise<boolean>;

/**
 * Hands out engine ports from an inclusive range. A restart keeps the shard's port when
 * it is still bindable, so its endpoint stays put; a new shard takes the next free port
 * after the last one handed out (round-robin), so a just-stopped engine's port is not
 * reused at once.
 */
export class PortPool {
  private cursor: number;

  constructor(
    readonly range: [number, number],
    readonly host: string,
    private readonly canBindPort: BindCheck = canBind,
  ) {
    this.cursor = range[0];
  }

  /** "30000-30200 on 0.0.0.0", for the failure when nothing is free. */
  describe(): string {
    return `${this.range[0]}-${this.range[1]} on ${this.host}`;
  }

  /**
   * Gives `holder` its previous port if still free, else the next free one; undefined
   * when the range is exhausted. `holder.port` is set before each async bind check, so
   * concurrent reservations (which consult `taken`) skip the port being tried.
   */
  async reserve(holder: PortHolder, taken: (port: number) => boolean): Promise<number | undefined> {
    const [lo, hi] = this.range;
    const previous = holder.port !== undefined && holder.port >= lo && holder.port <= hi ? holder.port : undefined;
    holder.port = undefined;
    if (previous !== undefined && (await this.try(holder, previous, taken))) return previous;
    const size = hi - lo + 1;
    for (let i = 0; i < size; i++) {
      const port = lo + ((this.cursor - lo + i) % size);
      if (!(await this.try(holder, port, taken))) continue;
      this.cursor = port === hi ? lo : port + 1;
      return port;
    }
    return undefined;
  }

  private async try(holder: PortHolder, port: number, taken: (port: number) => boolean): Promise<boolean> {
    if (taken(port)) return false;
    holder.port = port;
    if (await this.canBindPort(port, this.host)) return true;
    holder.port = undefined;
    return false;
  }
}

/** An exclusive listen that is closed again at once. */
export function canBind(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
