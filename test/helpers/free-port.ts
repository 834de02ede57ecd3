/** A TCP port on 127.0.0.1 that was free a moment ago (for a listener a test starts elsewhere, e.g. a guest app). */
import net from 'node:net';

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}
