/**
 * What the leader lock and the events feed share: a dedicated PostgreSQL connection (never pooled: what it holds,
 * a session lock or a LISTEN, belongs to the session) that reports its own failure once, a sleep that can be cut
 * short, and the loop that runs a session, waits, and runs it again until stopped.
 */
import pg from 'pg';

export interface DedicatedClient {
  client: pg.Client;
  /** Called at most once, when the connection fails by itself (an error or its end), never after `close`. */
  onLost(fn: () => void): void;
  close(): Promise<void>;
}

export async function dedicatedClient(url: string, applicationName: string, config: pg.ClientConfig = {}): Promise<DedicatedClient> {
  const client = new pg.Client({ ...config, connectionString: url, application_name: applicationName, keepAlive: true });
  const lost: Array<() => void> = [];
  let closing = false;
  const fail = () => {
    if (!closing) for (const fn of lost.splice(0)) fn();
  };
  client.on('error', fail);
  client.on('end', fail);
  try {
    await client.connect();
  } catch (e) {
    closing = true;
    throw e;
  }
  return {
    client,
    onLost: (fn) => lost.push(fn),
    close: async () => {
      closing = true;
      await client.end().catch(() => undefined);
    },
  };
}

export interface Sleeper {
  /** Resolves after `ms` (never, without), or at the next `wake`. */
  sleep(ms?: number): Promise<void>;
  wake(): void;
}

export function sleeper(): Sleeper {
  let wake: (() => void) | undefined;
  return {
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        const timer = ms === undefined ? undefined : setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      }),
    wake: () => wake?.(),
  };
}

/** Runs `session` again `retryMs` after each end until `stop`, which wakes the loop and waits for it. */
export function sessionLoop(session: () => Promise<void>, retryMs: number, z: Sleeper, onEnd?: () => void) {
  let stopping = false;
  const running = (async () => {
    await null; // the first session starts after the caller holds the returned handle
    while (!stopping) {
      await session();
      if (!stopping) await z.sleep(retryMs);
    }
    onEnd?.();
  })();
  return {
    get stopping() {
      return stopping;
    },
    async stop() {
      stopping = true;
      z.wake();
      await running;
    },
  };
}
