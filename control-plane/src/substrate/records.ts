/**
 * A driver's machine records: one `machine.json` per machine under `<root>/machines/<id>/`, replaced
 * atomically (written beside, then renamed), so a control plane killed mid-write leaves the old record or the
 * new one. Both real drivers keep their machines here (vm/driver.ts, container/driver.ts); what a record
 * holds is the driver's own type. The files are the host's own (the directory is 0700 under the root).
 */
import fs from 'node:fs';
import path from 'node:path';
import { assertMachineId, notFound } from './substrate.js';

const RECORD = 'machine.json';

/** A machine's directory under a root (pure: where a socket is is known before any substrate object). */
export function machineDirOf(root: string, id: string): string {
  return path.join(root, 'machines', id);
}

/** A machine's record read without the records object, or null when it has none that parses. */
export function peekRecord<R>(root: string, id: string): R | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(machineDirOf(root, id), RECORD), 'utf8')) as R;
  } catch {
    return null;
  }
}

export class MachineRecords<R extends { id: string }> {
  constructor(private readonly root: string) {
    fs.mkdirSync(path.join(root, 'machines'), { recursive: true, mode: 0o700 });
  }

  dir(id: string): string {
    return machineDirOf(this.root, id);
  }

  has(id: string): boolean {
    return fs.existsSync(path.join(this.dir(id), RECORD));
  }

  /** The record; a machine without one is not found here. */
  read(id: string): R {
    assertMachineId(id);
    if (!this.has(id)) throw notFound();
    return JSON.parse(fs.readFileSync(path.join(this.dir(id), RECORD), 'utf8')) as R;
  }

  write(rec: R): void {
    const f = path.join(this.dir(rec.id), RECORD);
    fs.writeFileSync(`${f}.tmp`, JSON.stringify(rec));
    fs.renameSync(`${f}.tmp`, f);
  }

  /** Every machine directory's name, recorded or not (a create or destroy in progress has none). */
  entries(): string[] {
    return fs.readdirSync(path.join(this.root, 'machines'));
  }

  /** The machines with a record. */
  ids(): string[] {
    return this.entries().filter((id) => this.has(id));
  }

  /** Every record that reads (one being created or destroyed is passed over). */
  all(): R[] {
    return this.entries().flatMap((id) => peekRecord<R>(this.root, id) ?? []);
  }
}
