/**
 * Picks and prepares the substrate for `npm start`: vm when hardware KVM is usable, else container
 * (SUBSTRATE=vm|container|fake overrides). The guest image is built on first use, in the background,
 * with its progress printed; until it is ready every substrate call waits for it, so the API answers
 * from the first second and the first machine create simply takes longer.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { AppError } from '../../shared/errors.js';
import type { Config } from './config.js';
import { ContainerSubstrate, containerEarlyChannel } from './substrate/container/driver.js';
import { FakeSubstrate } from './substrate/fake.js';
import { defaultImageCacheDir, ensureImage } from './substrate/image.js';
import { callOn, forwarder } from './substrate/forward.js';
import { COMPUTE_CALLS, LAYER_CALLS, openUnixChannel, type DiskVolume, type EarlyChannel, type Substrate, type SubstrateKind } from './substrate/substrate.js';
import { probeKvm } from './substrate/vm/kvm-probe.js';
import { VmSubstrate, vmEarlyChannel } from './substrate/vm/driver.js';
import { ERRORS } from './errors.js';
import { btrfsCodec } from './substrate/disks/transfer/btrfs-codec.js';
import type { TransferEndpoint } from './substrate/disks/transfer/endpoint.js';
import { qcow2Codec } from './substrate/disks/transfer/qcow2-codec.js';

/** The repository root: the nearest ancestor holding package.json and images/ (works from src and dist). */
export function findRepoRoot(from = path.dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'images'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the repository root (package.json + images/)');
    dir = up;
  }
}

export function chooseSubstrateKind(config: Pick<Config, 'substrate'>, kvmUsable: () => boolean): SubstrateKind {
  if (config.substrate) return config.substrate;
  return kvmUsable() ? 'vm' : 'container';
}

/**
 * A substrate whose real implementation arrives later (after the image build). Calls wait for it; if
 * preparing failed, they answer 503 with the reason kept out of the message (it can name paths). Compute and
 * layer calls are forwarded as one rule over the ports' call lists; only the channel (reachable early) and the
 * volume (asked synchronously) have rules of their own.
 */
// The class takes the ports' calls from forwarder() in its constructor; the interface tells TypeScript so.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface DeferredSubstrate extends Substrate {}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
/** What preparing a host gives: its substrate, and its side of layer transfers between hosts (none: layers stay here). */
export interface PreparedHost {
  substrate: Substrate;
  transfer: TransferEndpoint | null;
}

export class DeferredSubstrate {
  private impl: Substrate | null = null;
  private failed: unknown = null;
  readonly ready: Promise<Substrate>;
  /** The prepared substrate's transfer endpoint (null: none, or preparing failed). */
  readonly transfer: Promise<TransferEndpoint | null>;

  /**
   * `early`: where a machine's agent socket is and how its agent is enrolled, known before the substrate is
   * ready. After a control-plane restart the guest image is checked (the agent staged and hashed: seconds)
   * before the substrate exists; machines still running from the last run are reachable meanwhile.
   */
  constructor(readonly kind: SubstrateKind, prepare: () => Promise<PreparedHost>, private readonly early?: EarlyChannel) {
    const prepared = prepare();
    this.transfer = prepared.then((p) => p.transfer, () => null);
    this.ready = prepared.then(
      (p) => (this.impl = p.substrate),
      (e) => {
        this.failed = e;
        throw e;
      },
    );
    this.ready.catch(() => {});
    Object.assign(this, forwarder<Substrate, WaitingCall>(WAITING_CALLS, async (name, args) => callOn(await this.get(), name, args)));
  }

  private async get(): Promise<Substrate> {
    if (this.impl) return this.impl;
    if (this.failed) throw prepareFailed();
    try {
      return await this.ready;
    } catch {
      throw prepareFailed();
    }
  }

  openChannel = async (id: string): Promise<Duplex> => {
    // A channel is wanted only for running machines, which exist only once the substrate does.
    if (this.impl) return this.impl.openChannel(id);
    if (this.early) return openUnixChannel(this.early.channelPath(id));
    throw preparing();
  };
  issueEnrollment = async (id: string): Promise<string | null> => {
    if (this.impl) return this.impl.issueEnrollment(id);
    if (this.early) return this.early.issueEnrollment(id);
    throw preparing();
  };
  diskVolume = (): DiskVolume | null => this.impl?.diskVolume() ?? null;
}

/** What waits for the substrate: every compute and layer call, and a remount (asked only of a volume seen). */
const WAITING_CALLS = [...COMPUTE_CALLS, ...LAYER_CALLS, 'remountDiskVolume'] as const;
type WaitingCall = (typeof WAITING_CALLS)[number];

/** The reason (the image build, a directory guest root cannot reach) is in the server log: it can name paths. */
function prepareFailed(): AppError {
  return ERRORS.hostPrepareFailed();
}

function preparing(): AppError {
  return ERRORS.hostPreparing();
}

/**
 * A container host's side of layer transfers: its btrfs layer store on the guest image (named by its content hash).
 * Copy-mode disks (no btrfs under DATA_DIR) are plain directories, which cannot be sent as btrfs streams: none.
 */
export function preparedContainer(s: ContainerSubstrate, image: { rootfs: string; hash: string }): PreparedHost {
  const transfer = s.diskMode === 'snapshot' ? { store: s.disks, codec: btrfsCodec, base: { path: image.rootfs, id: image.hash } } : null;
  return { substrate: s, transfer };
}

export interface HostOptions {
  config: Config;
  /** Progress and warnings for the operator (the terminal running `npm start`). */
  say: (line: string) => void;
  repoRoot?: string;
}

export function prepareSubstrate(o: HostOptions, chosen?: SubstrateKind): DeferredSubstrate {
  const kind = chosen ?? chooseSubstrateKind(o.config, () => probeKvm().usable);
  const root = path.resolve(o.config.dataDir, 'substrate');
  const cacheDir = o.config.imageCacheDir ?? defaultImageCacheDir();
  return new DeferredSubstrate(kind, async () => {
    if (kind === 'fake') {
      o.say('substrate: fake (in-memory; machines have no desktop, files or shell)');
      return { substrate: new FakeSubstrate(), transfer: null };
    }
    const repoRoot = o.repoRoot ?? findRepoRoot();
    o.say(`substrate: ${kind}; preparing the guest image (cached in ${cacheDir}; the first build takes a few minutes)`);
    const image = await ensureImage({
      repoRoot, cacheDir, artifacts: kind === 'vm' ? 'all' : 'container', log: (l) => o.say(`image: ${l}`),
    });
    o.say(`image ${image.hash} ready`);
    // Layers move between hosts on the same guest image, named by its content hash (never a host path).
    if (kind === 'container') return preparedContainer(new ContainerSubstrate({ root, baseRootfs: image.rootfs, warn: (m) => o.say(m) }), image);
    const s = new VmSubstrate({
      root, kernel: image.kernel, initrd: image.initrd, baseDisk: image.baseDisk, warn: (m) => o.say(`vm: ${m}`), network: o.config.vmNetwork,
    });
    return { substrate: s, transfer: { store: s.disks, codec: qcow2Codec, base: { path: image.baseDisk, id: image.hash } } };
  }, kind === 'container' ? containerEarlyChannel(root) : kind === 'vm' ? vmEarlyChannel(root) : undefined);
}
