/**
 * A TCP relay on 127.0.0.1 in front of a server, whose `drop()` cuts every open connection at once: a real
 * network failure under a client (no close frame, no HTTP answer), for testing reconnection.
 */
import net from 'node:net';

export interface TcpProxy {
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Destroys every open connection (both sides). */
  drop(): void;
  close(): Promise<void>;
}

/** Pipes `client` both ways to 127.0.0.1:`targetPort`; both sockets are kept in `open` while they live. */
export function relay(client: net.Socket, targetPort: number, open: Set<net.Socket>): void {
  const upstream = net.connect(targetPort, '127.0.0.1');
  for (const s of [client, upstream]) {
    open.add(s);
    s.on('close', () => open.delete(s));
    s.on('error', () => {});
  }
  client.pipe(upstream).pipe(client);
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
}

export async function tcpProxy(targetPort: number): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    relay(client, targetPort, open);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    drop: () => {
      for (const s of open) s.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}
