/**
 * Operator CLI, against the same data directory as the server (SQLite WAL lets both write):
 *
 *   node dist/control-plane/src/cli.js billing-event <org_id> <event> [plan_id]
 *   node dist/control-plane/src/cli.js agreement <org_id> <entitlements.json> <from ISO> [until ISO]
 *   node dist/control-plane/src/cli.js billing-sync
 *   node dist/control-plane/src/cli.js rotate-secrets-key
 *
 * `billing-event` delivers a provider event (as a payment provider's webhook would) through the
 * account state table. `agreement` records an effective-dated entitlement override (enterprise).
 * `rotate-secrets-key` adds a new active key to the SECRETS_KEYRING file, re-seals every stored secret
 * under it and retires keys nothing uses any more (safe while the server runs).
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { AppError, parseOrThrow } from '../../shared/errors.js';
import { MachineSize } from '../../shared/schemas/machine.js';
import { parseConfig, type Config } from './config.js';
import { PROVIDER_EVENTS, type ProviderEvent } from './domain/billing-account.js';
import { createServices } from './services/index.js';
import { openStoreDb } from './store/engine/open.js';
import { createStore } from './store/store.js';
import { openKeyring } from './secrets/keyring-file.js';

const Limit = z.number().int().min(0).nullable();
export const AgreementEntitlements = z.strictObject({
  running_machines: Limit,
  machines: Limit,
  snapshots_per_machine: Limit,
  templates: Limit,
  members: Limit,
  concurrent_sessions: Limit,
  largest_size: MachineSize.nullable(),
  included_compute_standard_hours: Limit,
  included_hot_storage_gb: Limit,
  overage_allowed: z.boolean(),
});

export async function runCli(argv: string[], config: Config, out: (s: string) => void): Promise<number> {
  // The deployment's state: PostgreSQL when DATABASE_URL is set, else SQLite in DATA_DIR (as the server).
  const db = await openStoreDb({ databaseUrl: config.databaseUrl ?? undefined, dataDir: config.dataDir });
  try {
    // The keyring is opened here only for the command that needs it (others must work without one).
    const s = await createServices({ config, store: createStore(db), keyring: null, role: 'cli' });
    const [cmd, ...args] = argv;
    if (cmd === 'rotate-secrets-key') {
      let file;
      try {
        file = openKeyring(config, out, { sealedSecrets: await s.store.secrets.countAll() });
      } catch (e) {
        // These messages name the file and the problem, never key material.
        out(`keyring: ${(e as Error).message}`);
        return 1;
      }
      if (!file) {
        out('SECRETS_KEYRING=off: there is no keyring to rotate');
        return 2;
      }
      const r = await s.secrets.rotateKey(file);
      out(`active key ${r.key_id}; re-sealed ${r.resealed} secret(s); retired ${r.retired.length ? r.retired.join(', ') : 'no key'}` +
        (r.unreadable ? `; ${r.unreadable} secret(s) are sealed under a key this keyring lacks and were left as they are` : ''));
      return r.unreadable ? 1 : 0;
    }
    if (!(await s.store.identity.orgById(args[0] ?? '')) && cmd !== 'billing-sync') {
      out('no such organization');
      return 2;
    }
    switch (cmd) {
      case 'billing-event': {
        const ev = args[1] as ProviderEvent;
        if (!PROVIDER_EVENTS.includes(ev)) {
          out(`event must be one of: ${PROVIDER_EVENTS.join(', ')}`);
          return 2;
        }
        await s.billing.sink.apply(args[0]!, ev, args[2] ? { plan_id: args[2] } : {});
        out(`account is now ${(await s.store.billing.account(args[0]!))!.state}`);
        return 0;
      }
      case 'agreement': {
        const e = parseOrThrow(AgreementEntitlements, JSON.parse(fs.readFileSync(args[1]!, 'utf8')), 'entitlements');
        const from = new Date(args[2] ?? '');
        const until = args[3] ? new Date(args[3]) : null;
        if (Number.isNaN(from.getTime()) || (until && Number.isNaN(until.getTime()))) {
          out('from/until must be ISO-8601 timestamps');
          return 2;
        }
        out(`agreement ${await s.billing.setOverride(args[0]!, e, from, until)} recorded`);
        return 0;
      }
      case 'billing-sync':
        await s.billing.provider.syncAll();
        out('done');
        return 0;
      default:
        out('usage: cli.js billing-event <org_id> <event> [plan_id] | agreement <org_id> <file.json> <from> [until] | billing-sync | rotate-secrets-key');
        return 2;
    }
  } catch (e) {
    out(e instanceof AppError ? `${e.code}: ${e.message}` : `failed: ${(e as Error).name}`);
    return 1;
  } finally {
    await db.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await runCli(process.argv.slice(2), parseConfig(process.env), (s) => process.stdout.write(s + '\n'));
}
