/**
 * The warm pool's ledger: which started-but-unassigned machines this host holds, recorded before each one is
 * made and dropped once it is destroyed or taken, so a control plane killed at any step leaves nothing the next
 * one does not know (warm-pool.ts `reconcile`). A take is recorded by the machine's row itself (the transaction
 * that admits the create): a ledger entry whose id has a row belongs to that row's tenant, never to the pool.
 */
import fs from 'node:fs';
import { MachineSize } from '../../../../shared/schemas/machine.js';
import { MACHINE_ID_RE } from '../../../../shared/ids.js';

export interface PoolEntry {
  id: string;
  size: MachineSize;
}

export interface PoolLedger {
  add(e: PoolEntry): void;
  remove(id: string): void;
  all(): PoolEntry[];
}

/** Entries that do not parse are skipped: the file is the host's own, but a torn or edited one must not crash. */
function parseEntries(text: string): PoolEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((x: unknown) => {
    if (typeof x !== 'object' || x === null) return [];
    const { id, size } = x as Record<string, unknown>;
    const s = MachineSize.safeParse(size);
    return typeof id === 'string' && MACHINE_ID_RE.test(id) && s.success ? [{ id, size: s.data }] : [];
  });
}

/** A JSON file (0600, replaced atomically: written beside, then renamed). */
export function fileLedger(file: string): PoolLedger {
  const read = (): PoolEntry[] => {
    try {
      return parseEntries(fs.readFileSync(file, 'utf8'));
    } catch {
      return [];
    }
  };
  const write = (entries: PoolEntry[]) => {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(entries), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
  };
  return {
    add: (e) => write([...read().filter((x) => x.id !== e.id), e]),
    remove: (id) => write(read().filter((x) => x.id !== id)),
    all: read,
  };
}

/** The warm pool's settings (MachineServiceDeps.warmPool). */
export interface WarmPoolConfig {
  /** Most members per size (WARM_POOL_PER_SIZE); 0: no pool. */
  perSize: number;
  ledger: PoolLedger;
  /** How often the pool looks at demand, the host and its members (default 2 s). */
  tickMs?: number;
  /** How long a new member may take until its agent listens (default 120 s). */
  readyTimeoutMs?: number;
}
