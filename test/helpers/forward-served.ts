/**
 * Two control-plane processes' doors in one test process, over one machines rig (one database, as processes
 * sharing PostgreSQL do): B owns every machine — its tenant-facing listener (gateway + previews) and its internal
 * listener, whose handlers are `internalHandlers({gateway, previews})`; A is where callers arrive — its own
 * listener with the gateway and the preview proxy given a forwarder and an OwnerOf stub naming B's internal
 * listener (through a wiretap, so a test reads every byte that crossed). Both stubs can be changed mid-test:
 * `ownerAddress` (B unreachable) and `bSaysMoved` (B refuses: the machine's host changed).
 */
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import type { Test } from 'tap';
import { createForwarder } from '../../control-plane/src/cluster/forward/forwarder.js';
import { createInternalServer } from '../../control-plane/src/cluster/forward/listener.js';
import type { Owner, OwnerOf } from '../../control-plane/src/cluster/forward/owner.js';
import type { GatewayOptions } from '../../control-plane/src/gateway/gateway.js';
import { internalHandlers } from '../../control-plane/src/internal-handlers.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { closeServer, EDGE_ID, KEY, listenOn, OWNER_ID, wiretap } from './forward-rig.js';
import type { MachinesRig } from './machines-rig.js';
import { serveWithGateway, type ServedGateway } from './serve-gateway.js';

/** A log that can be waited on (never on a clock). */
export class WaitableLog {
  readonly lines: LogLine[] = [];
  private readonly added = new EventEmitter();
  readonly sink = (l: LogLine): void => {
    this.lines.push(l);
    this.added.emit('line');
  };

  /** The first line matching `pred`, waiting for it; a hang guard (not a timing check) fails after 30 s. */
  async next(pred: (l: LogLine) => boolean): Promise<LogLine> {
    const guard = AbortSignal.timeout(30_000);
    for (;;) {
      const found = this.lines.find(pred);
      if (found) return found;
      await once(this.added, 'line', { signal: guard });
    }
  }
}

export interface ForwardedPair {
  /** Where callers arrive: every machine's channels and previews go to B. */
  a: ServedGateway;
  /** The owner's tenant-facing listener (its gateway and previews also serve the internal listener). */
  b: ServedGateway;
  aLog: WaitableLog;
  bLog: WaitableLog;
  /** Everything A sent to B's internal listener. */
  wire(): string;
  /** The internal address A forwards to (change it to make B unreachable). */
  ownerAddress: string;
  /** When true, B answers that the machine's host is no longer its own. */
  bSaysMoved: boolean;
}

export async function startForwardedPair(t: Test, rig: MachinesRig, o: { gateway?: GatewayOptions } = {}): Promise<ForwardedPair> {
  const aLog = new WaitableLog();
  const bLog = new WaitableLog();
  const caller = { trustProxy: false, proto: 'http' as const };

  // B: owns every machine unless told it moved.
  const bForwarder = createForwarder({ key: KEY, processId: OWNER_ID });
  const bOwnerOf: OwnerOf = async () => (pair.bSaysMoved ? { kind: 'remote', processId: 'cp-third', address: 'http://127.0.0.1:1' } : { kind: 'local' });
  const b = await serveWithGateway(rig, {
    deps: { log: bLog.sink, forwarding: { ownerOf: bOwnerOf, forwarder: bForwarder, caller } },
    gateway: o.gateway,
    previews: { forwarding: { ownerOf: bOwnerOf, forwarder: bForwarder } },
  });
  const internal: http.Server = createInternalServer({ key: KEY, processId: OWNER_ID, handlers: internalHandlers({ gateway: b.gateway, previews: b.previews, log: bLog.sink }), log: bLog.sink });
  const internalPort = await listenOn(internal);
  const tap = await wiretap(t, internalPort);

  // A: every machine is B's.
  const aForwarder = createForwarder({ key: KEY, processId: EDGE_ID, log: aLog.sink });
  const aOwnerOf: OwnerOf = async (): Promise<Owner> => ({ kind: 'remote', processId: OWNER_ID, address: pair.ownerAddress });
  const a = await serveWithGateway(rig, {
    deps: { log: aLog.sink, forwarding: { ownerOf: aOwnerOf, forwarder: aForwarder, caller } },
    gateway: o.gateway,
    previews: { forwarding: { ownerOf: aOwnerOf, forwarder: aForwarder } },
  });

  t.teardown(async () => {
    await a.close();
    aForwarder.close();
    await b.close();
    bForwarder.close();
    await closeServer(internal);
  });
  const pair: ForwardedPair = { a, b, aLog, bLog, wire: tap.sent, ownerAddress: tap.address, bSaysMoved: false };
  return pair;
}
