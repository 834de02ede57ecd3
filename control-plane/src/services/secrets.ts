/**
 * Machine secrets: store (sealed under the keyring), list, revoke, deliver into the running machine,
 * and hand a value to the keyboard for typing by reference.
 *
 * Delivery writes the machine's whole set to the agent (`PUT /secrets`), which keeps it in
 * /run/computer/secrets.env on a tmpfs. Deliveries to one machine run one at a time, each reading the
 * stored set when it runs, so the last one always carries the latest state. A delivery is pushed on
 * every store and revoke of a running machine and after every boot; a failed one is retried with
 * backoff while the same boot lasts. A stopped machine has no secrets in it (its memory is gone) and
 * gets them again at its next start.
 *
 * No value ever leaves this module except towards the machine's agent: records carry names and
 * versions, log lines carry machine ids, names and error codes.
 */
import { AppError } from '../../../shared/errors.js';
import type { Page, PageQuery } from '../../../shared/schemas/pagination.js';
import { MAX_TYPE_TEXT } from '../../../shared/schemas/input.js';
import { type MachineSecretList, type OrgSecret, type Secret, type SecretPut } from '../../../shared/schemas/secrets.js';
import { agentOf, type MachineAgent } from './machine-agent/index.js';
import type { OrgPrincipal } from '../context.js';
import { capacityRefusal, deliveredAt } from '../domain/secrets.js';
import type { LogSink } from '../log.js';
import { open, retireUnusedKeys, seal, withNewActiveKey, SecretOpenError, type SecretBinding } from '../secrets/crypto.js';
import type { KeyringFile, KeyringSource } from '../secrets/keyring-file.js';
import { pageOf } from '../store/pagination.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { SecretRow } from '../store/repos/secrets.js';
import type { Store } from '../store/store.js';
import type { QuotaService } from './quotas.js';
import { againOnUnique, ConcurrentWrite } from '../store/unique-violation.js';
import { ERRORS } from '../errors.js';

export interface SecretServiceDeps {
  store: Store;
  agent: MachineAgent;
  /** null: SECRETS_KEYRING=off, storing is refused with 501. */
  keyring: KeyringSource | null;
  now: () => Date;
  /** Storing creates (or replaces) a secret: refused unless the account may create anything (spec: subscription). */
  quotas: Pick<QuotaService, 'checkSubscription'>;
  log?: LogSink;
  /** Redelivery backoff (tests shorten it): waits between attempts, and how long one boot is retried. */
  retry?: { delaysMs: readonly number[]; giveUpMs: number };
  /** Deadline of one delivery request to the agent. */
  deliveryTimeoutMs?: number;
}

/**
 * The keyring cannot be read (gone, loosened, damaged) or lacks a stored secret's key: 503, because only an
 * operator can repair it (restore the file from the backup taken with the database) and nothing was changed.
 */
function keyringUnavailable(cause: unknown): AppError {
  return ERRORS.secretsKeyringUnavailable(cause);
}

const DEFAULT_RETRY = { delaysMs: [250, 500, 1_000, 2_000, 4_000, 8_000, 15_000], giveUpMs: 180_000 };

export interface RotationResult {
  key_id: string;
  resealed: number;
  /** Rows whose key is not in the keyring (left as they are). */
  unreadable: number;
  retired: string[];
}

export function createSecretService(d: SecretServiceDeps) {
  const { store } = d;
  const log = d.log ?? (() => {});
  const retry = d.retry ?? DEFAULT_RETRY;
  const at = () => d.now().toISOString();

  const binding = (r: Pick<SecretRow, 'org_id' | 'machine_id' | 'name' | 'version'>): SecretBinding => ({
    org_id: r.org_id, machine_id: r.machine_id, name: r.name, version: r.version,
  });

  async function machineIn(orgId: string, id: string): Promise<MachineRow> {
    const m = await store.machines.inOrg(orgId, id);
    if (!m) throw ERRORS.noSuchMachine();
    return m;
  }

  function keyring() {
    // Deployment rule (spec, errors §7): no keyring, no storing.
    if (!d.keyring) throw ERRORS.noSecretsKeyringToStore();
    try {
      return d.keyring.current();
    } catch (e) {
      // The file was removed, made readable by others or damaged while the server ran: the operator's
      // fault to repair, never the caller's. Logged by kind (a message can hold the path).
      log({ event: 'secrets_keyring_unavailable', kind: (e as NodeJS.ErrnoException).code ?? 'invalid' });
      throw keyringUnavailable(e);
    }
  }

  function view(r: SecretRow, m: MachineRow): Secret {
    return { name: r.name, version: r.version, delivered_at: deliveredAt(r, m), created_at: r.created_at, updated_at: r.updated_at };
  }

  function openRow(r: SecretRow): string | null {
    try {
      return open(keyring(), { key_id: r.key_id, blob: r.sealed }, binding(r));
    } catch (e) {
      if (!(e instanceof SecretOpenError)) throw e;
      log({ event: 'secret_undecryptable', machine_id: r.machine_id, name: r.name, key_id: r.key_id, reason: e.reason });
      return null;
    }
  }

  // --- delivery -------------------------------------------------------------------------------

  const chains = new Map<string, Promise<unknown>>();

  /** Run `fn` after every earlier delivery to this machine. */
  function serial<T>(machineId: string, fn: () => Promise<T>): Promise<T> {
    const prev = chains.get(machineId) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => {});
    chains.set(machineId, tail);
    void tail.then(() => {
      if (chains.get(machineId) === tail) chains.delete(machineId);
    });
    return run;
  }

  type Outcome = 'delivered' | 'not_running' | 'no_keyring';

  /** Push the stored set to the machine now. Throws when the agent cannot take it. */
  async function pushSet(machineId: string): Promise<Outcome> {
    if (!d.keyring) return 'no_keyring';
    // Read and open in one transaction: a key rotation (which rewrites the keyring in its own
    // transaction) cannot retire a key between reading a row and opening it.
    const snap = await store.db.tx(async () => {
      const m = await store.machines.byId(machineId);
      if (!m || m.state !== 'running') return null;
      const secrets: Record<string, string> = {};
      const sent: Array<{ name: string; version: number }> = [];
      for (const r of await store.secrets.forMachine(machineId)) {
        const v = openRow(r);
        if (v === null) continue;
        secrets[r.name] = v;
        sent.push({ name: r.name, version: r.version });
      }
      return { m, secrets, sent };
    });
    if (!snap) return 'not_running';
    // The agent's answer is untrusted: parsed against the route's schema (or an error), nothing from it is kept.
    await d.agent.call(agentOf(snap.m), 'secrets.replace', { body: JSON.stringify({ secrets: snap.secrets }), timeoutMs: d.deliveryTimeoutMs ?? 10_000 });
    const t = at();
    await store.db.tx(async () => {
      for (const s of snap.sent) await store.secrets.markDelivered(machineId, s.name, s.version, snap.m.state_changed_at, t);
    });
    return 'delivered';
  }

  /** Revoke one name from the running machine (needs no key: nothing is decrypted). */
  async function revokeName(machineId: string, name: string): Promise<Outcome> {
    const m = await store.machines.byId(machineId);
    if (!m || m.state !== 'running') return 'not_running';
    // Stored again since the revoke (a retry running late): that store's own delivery carries the new value.
    if (await store.secrets.get(machineId, name)) return 'delivered';
    await d.agent.call(agentOf(m), 'secrets.delete', { params: { name }, timeoutMs: d.deliveryTimeoutMs ?? 10_000 });
    return 'delivered';
  }

  /**
   * Keep trying `attempt` (serialised with the machine's other deliveries) while the machine stays in
   * the boot it was in when this started; give up at the next stop or after `retry.giveUpMs`.
   */
  function retryInBackground(machineId: string, what: string, attempt: () => Promise<Outcome>, boot: Promise<string | undefined> = bootOf(machineId)): void {
    const started = Date.now();
    let i = 0;
    const tick = async () => {
      const m = await store.machines.byId(machineId);
      if (!m || m.state !== 'running' || m.state_changed_at !== (await boot)) return;
      try {
        await serial(machineId, attempt);
        return;
      } catch (e) {
        if (Date.now() - started > retry.giveUpMs) {
          log({ event: 'secrets_delivery_gave_up', machine_id: machineId, operation: what, code: e instanceof AppError ? e.code : 'internal_error' });
          return;
        }
      }
      const wait = retry.delaysMs[Math.min(i++, retry.delaysMs.length - 1)]!;
      setTimeout(() => void tick().catch(() => {}), wait).unref?.();
    };
    setTimeout(() => void tick().catch(() => {}), retry.delaysMs[0] ?? 0).unref?.();
  }

  /** The machine's boot as of now (the query is queued at once; a store that fails gives no boot). */
  function bootOf(machineId: string): Promise<string | undefined> {
    return store.machines.byId(machineId).then(
      (m) => m?.state_changed_at,
      () => undefined,
    );
  }

  /** One attempt now (awaited by the API call), then retries in the background if it failed. */
  async function pushNow(machineId: string, what: string, attempt: () => Promise<Outcome>): Promise<void> {
    try {
      await serial(machineId, attempt);
    } catch (e) {
      log({ event: 'secrets_delivery_failed', machine_id: machineId, operation: what, code: e instanceof AppError ? e.code : 'internal_error' });
      retryInBackground(machineId, what, attempt);
    }
  }

  return {
    /**
     * Refuses early (before the body is read) what cannot be stored: another org's machine, no keyring, an account
     * that may create nothing.
     */
    async checkStorable(orgId: string, machineId: string): Promise<void> {
      await machineIn(orgId, machineId);
      keyring();
      await d.quotas.checkSubscription(orgId);
    },

    async put(p: OrgPrincipal, machineId: string, body: SecretPut): Promise<Secret> {
      const orgId = p.org_id;
      const valueBytes = Buffer.byteLength(body.value, 'utf8');
      // Two stores racing (PostgreSQL, two processes past `get` at once): the loser's insert is refused by the unique
      // index, or its replace finds the version moved, and its transaction runs again on the winner's version — the
      // version a store after the winner's gets (the first store's loser becomes version 2).
      const { row } = await againOnUnique(() => store.db.tx(async () => {
        const m = await machineIn(orgId, machineId);
        if (m.state === 'deleting') throw ERRORS.machineBeingDeleted();
        await d.quotas.checkSubscription(orgId);
        const refusal = capacityRefusal(await store.secrets.usage(m.id, body.name), valueBytes);
        if (refusal) throw ERRORS.secretsFull(refusal);
        // The keyring is read inside the transaction: see pushSet.
        const k = keyring();
        const t = at();
        const old = await store.secrets.get(m.id, body.name);
        if (old) {
          const version = old.version + 1;
          const s = seal(k, { org_id: orgId, machine_id: m.id, name: body.name, version }, body.value);
          // Another store replaced it since `get` (PostgreSQL, two processes): run again on its version.
          if (!(await store.secrets.replace(old.id, old.version, { version, key_id: s.key_id, sealed: s.blob, value_bytes: valueBytes, updated_at: t }))) {
            throw new ConcurrentWrite();
          }
        } else {
          const s = seal(k, { org_id: orgId, machine_id: m.id, name: body.name, version: 1 }, body.value);
          await store.secrets.insert({
            id: `${m.id}/${body.name}`, org_id: orgId, machine_id: m.id, name: body.name, version: 1, key_id: s.key_id, sealed: s.blob,
            value_bytes: valueBytes, created_at: t, updated_at: t, delivered_at: null, delivered_version: null, delivered_boot: null,
          });
        }
        return { row: (await store.secrets.get(m.id, body.name))! };
      }));
      await pushNow(machineId, 'store', () => pushSet(machineId));
      const m = (await store.machines.byId(machineId))!;
      return view((await store.secrets.get(machineId, row.name)) ?? row, m);
    },

    async list(orgId: string, machineId: string): Promise<MachineSecretList> {
      const m = await machineIn(orgId, machineId);
      return { data: (await store.secrets.forMachine(m.id)).map((r) => view(r, m)) };
    },

    async listOrg(orgId: string, q: PageQuery): Promise<Page<OrgSecret>> {
      // The machines of the page's rows, read before the rows are viewed (the view is synchronous).
      const machines = new Map<string, MachineRow>();
      const page = await pageOf(q, async (after, limit) => {
        const rows = await store.secrets.pageOrg(orgId, after, limit);
        for (const r of rows) if (!machines.has(r.machine_id)) machines.set(r.machine_id, (await store.machines.byId(r.machine_id))!);
        return rows;
      }, (r) => ({ machine_id: r.machine_id, ...view(r, machines.get(r.machine_id)!) }));
      return page;
    },

    /** Removed from storage at once; from the running machine now, or by retries if it cannot take it yet. */
    async remove(p: OrgPrincipal, machineId: string, name: string): Promise<void> {
      await store.db.tx(async () => {
        const m = await machineIn(p.org_id, machineId);
        if (!(await store.secrets.remove(m.id, name))) throw ERRORS.noSuchSecret();
      });
      await pushNow(machineId, 'revoke', () => revokeName(machineId, name));
    },

    /** The value to type for `POST …/keyboard/type {secret}`. Goes to the agent only. */
    valueForTyping(orgId: string, machineId: string, name: string): Promise<string> {
      return store.db.tx(async () => {
        const m = await machineIn(orgId, machineId);
        const r = await store.secrets.get(m.id, name);
        if (!r) throw ERRORS.noSuchSecret([{ field: 'secret', message: 'no secret of that name on this machine' }]);
        if (!d.keyring) throw ERRORS.noSecretsKeyring();
        const v = openRow(r);
        if (v === null) throw keyringUnavailable(null);
        if (v.length > MAX_TYPE_TEXT) {
          throw ERRORS.secretTooLongToType(MAX_TYPE_TEXT, [{ field: 'secret', message: `longer than ${MAX_TYPE_TEXT} characters` }]);
        }
        return v;
      });
    },

    /** After a boot: the machine's memory is empty, so its stored set goes in again (with retries). */
    deliverAfterBoot(m: Pick<MachineRow, 'id'>): void {
      const boot = bootOf(m.id);
      void store.secrets.forMachine(m.id).then(
        (rows) => {
          if (rows.length) retryInBackground(m.id, 'boot', () => pushSet(m.id), boot);
        },
        (e: unknown) => log({ event: 'secrets_delivery_failed', machine_id: m.id, operation: 'boot', code: e instanceof AppError ? e.code : 'internal_error' }),
      );
    },

    /** Test and operator hook: wait for this machine's deliveries queued so far. */
    settled: (machineId: string): Promise<unknown> => chains.get(machineId) ?? Promise.resolve(),

    /**
     * Key rotation (operator CLI): a new active key is added to the file, every value is re-sealed under
     * it, then keys no ciphertext names any more are dropped from the file. Each step leaves a keyring
     * that opens every row, so a crash at any point loses nothing; the file is rewritten inside the
     * transactions, which orders the rotation against a running server's reads and writes.
     */
    async rotateKey(file: KeyringFile): Promise<RotationResult> {
      file.write(withNewActiveKey(file.current(), d.now()));
      const k = file.current();
      let resealed = 0;
      let unreadable = 0;
      await store.db.tx(async () => {
        for (const r of await store.secrets.all()) {
          if (r.key_id === k.active) continue;
          let v: string;
          try {
            v = open(k, { key_id: r.key_id, blob: r.sealed }, binding(r));
          } catch (e) {
            if (!(e instanceof SecretOpenError)) throw e;
            unreadable++;
            continue;
          }
          const s = seal(k, binding(r), v);
          if (await store.secrets.reseal(r.id, r.version, r.key_id, { key_id: s.key_id, sealed: s.blob })) resealed++;
        }
      });
      const retired = await store.db.tx(async () => {
        const out = retireUnusedKeys(file.current(), await store.secrets.keyIds());
        if (out.retired.length) file.write(out.keyring);
        return out.retired;
      });
      return { key_id: k.active, resealed, unreadable, retired };
    },
  };
}
export type SecretService = ReturnType<typeof createSecretService>;
