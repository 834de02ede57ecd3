/**
 * The host-to-host layer routes (docs/substrates.md, "Moving disks between hosts"): what another process of the
 * deployment asks this one for when a fork, restore or create from a template on its host needs a layer held here.
 * Plugged into the internal listener as its host handlers (`createInternalServer({ hostHandlers })`); the listener
 * hands them host calls only, never a tenant's request, and the tenant API never sees these paths.
 *
 * | request                                    | answer                                                        |
 * |--------------------------------------------|---------------------------------------------------------------|
 * | GET /internal/layers/<layer>/chain         | 200 `{"chain":[…]}`: the layer's chain, oldest first           |
 * | GET /internal/layers/<layer>?have=<l1,l2…> | 200 the transfer body (wire.ts): what the caller lacks of it   |
 * | anything else                              | 404 `not_found` (`noSuchHostCall`)                              |
 *
 * `have` lists at most MAX_FRAMES layer ids (the caller names those of the chain it holds, so the path stays short).
 * An unknown layer is 404 `not_found`, another guest image 409 (`transferOtherBase`); errors are the envelope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import { AppError } from '../../shared/errors.js';
import type { HostCall, HostHandlers } from './cluster/forward/listener.js';
import { ERRORS } from './errors.js';
import { hostCallRefusal, sendJson } from './internal-host-router.js';
import { causeChain, silentLog, type LogSink } from './log.js';
import type { LayerSource } from './substrate/disks/transfer/source.js';
import { MAX_FRAMES } from './substrate/disks/transfer/wire.js';

const LAYER = '(blb_[0-9a-f]{1,64})';
const CHAIN = new RegExp(`^/internal/layers/${LAYER}/chain$`);
const EXPORT = new RegExp(`^/internal/layers/${LAYER}$`);
const HAVE = new RegExp(`^(?:${LAYER}(?:,${LAYER}){0,${MAX_FRAMES - 1}})?$`);

type LayerRoute = { kind: 'chain'; layer: string } | { kind: 'export'; layer: string; have: string[] };

/** The route a request names, or the error it gets (pure). */
export function layerRoute(method: string | undefined, url: string | undefined): LayerRoute | AppError {
  const u = new URL(url ?? '/', 'http://internal');
  if (method !== 'GET') return ERRORS.noSuchHostCall();
  const chain = CHAIN.exec(u.pathname);
  if (chain && !u.search) return { kind: 'chain', layer: chain[1]! };
  const exp = EXPORT.exec(u.pathname);
  if (!exp) return ERRORS.noSuchHostCall();
  const keys = [...u.searchParams.keys()];
  const have = u.searchParams.get('have') ?? '';
  if (keys.some((k) => k !== 'have') || keys.length > 1 || !HAVE.test(have)) {
    return ERRORS.layerHaveInvalid(MAX_FRAMES);
  }
  return { kind: 'export', layer: exp[1]!, have: have ? have.split(',') : [] };
}

/** The host handlers serving this host's layers from `source`. */
export function layerHostHandlers(source: Pick<LayerSource, 'export' | 'missing'>, o: { log?: LogSink } = {}): HostHandlers {
  const log = o.log ?? silentLog;
  const refuse = hostCallRefusal(log, 'layer_export_failed');
  async function serve(req: IncomingMessage, res: ServerResponse, c: HostCall): Promise<void> {
    const r = layerRoute(req.method, req.url);
    if (r instanceof AppError) return refuse(res, c, r);
    if (r.kind === 'chain') {
      sendJson(res, { chain: source.missing(r.layer, []) });
      return;
    }
    const out = await source.export(r.layer, r.have);
    log({ event: 'layer_export', layer: r.layer, to_host: c.host_id, frames: out.header.frames.length, bytes: out.bodyBytes });
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': out.bodyBytes });
    pipeline(out.body, res, (e) => {
      if (e) log({ event: 'layer_export_cut', layer: r.layer, to_host: c.host_id, cause: causeChain(e) });
    });
  }
  return {
    request(req, res, c) {
      req.resume();
      serve(req, res, c).catch((e: unknown) => (res.headersSent ? res.destroy() : refuse(res, c, e)));
    },
  };
}
