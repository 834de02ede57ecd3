/**
 * The fake substrate of a host whose machines outlive its control-plane process, as a real host's disks and guests
 * outlive it: FakeSubstrate's machines kept in one JSON file in the host's DATA_DIR, so a process that takes the
 * host over (a follower on the same DATA_DIR, or the process restarted) finds the machines the previous driver made,
 * stopped or running as it left them. Used by served-child.ts (`hostFileSubstrate`) for the kill drills.
 *
 * Only the host's driver changes its substrate, so the file has one writer at a time: a call reads the file again
 * only when it is not what this process last wrote (another process drove the host since), and a call that changes
 * a machine writes the whole file anew (written beside it, then renamed over it: a kill -9 mid-write leaves the old
 * file or the new one, never half of one). Layers (captures) are this process's own, not kept: the drills take none.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { FakeSubstrate, type FakeMachine } from '../../control-plane/src/substrate/fake.js';
import type { CaptureResult, CreateSpec, DiskSource, DiskUsage, Liveness, SubstrateStatus } from '../../control-plane/src/substrate/substrate.js';

export const HOST_SUBSTRATE_FILE = 'fake-substrate.json';

type Kept = Omit<FakeMachine, 'files'> & { files: Array<[string, string]> };

/** A host's machines as the file keeps them, by id (what a test reads to see what the substrate was asked to do). */
export function readHostMachines(dataDir: string): Map<string, Kept> {
  const file = path.join(dataDir, HOST_SUBSTRATE_FILE);
  if (!fs.existsSync(file)) return new Map();
  return new Map((JSON.parse(fs.readFileSync(file, 'utf8')) as Kept[]).map((m) => [m.id, m]));
}

function writeKept(file: string, machines: Iterable<FakeMachine>): string {
  const text = JSON.stringify([...machines].map((m): Kept => ({ ...m, files: [...m.files] })));
  fs.writeFileSync(`${file}.new`, text);
  fs.renameSync(`${file}.new`, file);
  return text;
}

/**
 * A guest of the host at `dataDir` ends on its own (FakeSubstrate.exitFromOutside: `crashed`, killed from outside), as
 * the host sees it: written to the host's file, which its driver reads again at its next call (its watch's).
 */
export function exitFromOutside(dataDir: string, id: string, how: 'crashed' | 'shutdown'): void {
  const machines = [...readHostMachines(dataDir).values()].map((m): FakeMachine => ({ ...m, files: new Map(m.files) }));
  const m = machines.find((x) => x.id === id);
  if (!m) throw new Error(`${id} is not on the host's substrate`);
  m.state = 'stopped';
  m.exit = how;
  writeKept(path.join(dataDir, HOST_SUBSTRATE_FILE), machines);
}

export class HostFileSubstrate extends FakeSubstrate {
  private readonly file: string;
  /** The file's text as this process last read or wrote it. */
  private known: string | null = null;

  /** `entered`: told of each create as it enters the substrate (before a hold, `FakeSubstrate.hold`, stops it). */
  constructor(dataDir: string, private readonly entered: (op: 'create', id: string) => void = () => {}) {
    super();
    this.file = path.join(dataDir, HOST_SUBSTRATE_FILE);
  }

  private load(): void {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch {
      return;
    }
    if (text === this.known) return;
    this.machines.clear();
    for (const m of JSON.parse(text) as Kept[]) this.machines.set(m.id, { ...m, files: new Map(m.files) });
    this.known = text;
  }

  private save(): void {
    this.known = writeKept(this.file, this.machines.values());
  }

  private async reading<T>(act: () => Promise<T>): Promise<T> {
    this.load();
    return act();
  }

  private async changing<T>(act: () => Promise<T>): Promise<T> {
    this.load();
    try {
      return await act();
    } finally {
      this.save();
    }
  }

  override create(spec: CreateSpec, opts: { start?: boolean } = {}): Promise<void> {
    this.entered('create', spec.id);
    return this.changing(() => super.create(spec, opts));
  }
  override start(id: string): Promise<void> {
    return this.changing(() => super.start(id));
  }
  override stop(id: string): Promise<void> {
    return this.changing(() => super.stop(id));
  }
  override destroy(id: string): Promise<void> {
    return this.changing(() => super.destroy(id));
  }
  override replaceDisk(id: string, source: DiskSource): Promise<void> {
    return this.changing(() => super.replaceDisk(id, source));
  }
  override reidentify(id: string): Promise<void> {
    return this.changing(() => super.reidentify(id));
  }
  override capture(id: string, holder: string): Promise<CaptureResult> {
    return this.reading(() => super.capture(id, holder));
  }
  override status(id: string): Promise<SubstrateStatus> {
    return this.reading(() => super.status(id));
  }
  override liveness(id: string): Promise<Liveness> {
    return this.reading(() => super.liveness(id));
  }
  override reattach(): Promise<Array<{ id: string; status: SubstrateStatus }>> {
    return this.reading(() => super.reattach());
  }
  override diskUsage(id: string): Promise<DiskUsage> {
    return this.reading(() => super.diskUsage(id));
  }
  override openChannel(id: string): Promise<Duplex> {
    return this.reading(() => super.openChannel(id));
  }
  override issueEnrollment(id: string): Promise<string | null> {
    return this.reading(() => super.issueEnrollment(id));
  }
}
