/**
 * Configuration, parsed once (in main.ts) from the environment and passed down. No other module
 * looks at the environment.
 */
import { z } from 'zod';
import { parseOrThrow } from '../../shared/errors.js';

const Bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((s) => s === 'true' || s === '1' || s === 'yes');
const Ratio = z.string().regex(/^\d+(\.\d+)?$/).transform(Number).pipe(z.number().gt(0).max(64));
const Origin = z.url({ protocol: /^https?$/ }).transform((u) => new URL(u).origin);

export const ConfigSchema = z
  .object({
    PORT: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(65535)).default(8080),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATA_DIR: z.string().min(1).default('./data'),
    /**
     * The state on PostgreSQL (`postgres://user:password@host:5432/db`, or `?host=/socket/dir`), shared by every
     * control plane started with it (docs/operations.md, "Running on Postgres"). Unset: SQLite in DATA_DIR. It may
     * hold a password: never logged, and an error about it never repeats it.
     */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\/[^\s]+$/, 'must be a postgres:// or postgresql:// URL')
      .optional(),
    /**
     * The region this host registers in (docs/operations.md, "Hosts"): the spec's placement hint, the only placement
     * word tenants see. A short slug.
     */
    REGION: z.string().regex(/^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/, 'a short slug: 1-32 of a-z, 0-9 and -, starting and ending with a letter or digit').default('default'),
    /** The origin browsers see; its origin is the one recognised for cookie-authenticated writes. */
    PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
    PREVIEW_DOMAIN: z.string().min(1).optional(),
    SECRETS_KEYRING: z.string().min(1).optional(),
    /** Comma-separated extra origins allowed to make cookie-authenticated writes (e.g. a dashboard host). */
    ALLOWED_ORIGINS: z
      .string()
      .default('')
      .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
      .pipe(z.array(Origin)),
    /** builtin (default: takes no money) or stripe (docs/api-auth-and-billing.md, "Stripe"). */
    BILLING_PROVIDER: z.enum(['builtin', 'stripe']).default('builtin'),
    /** stripe: the secret (or restricted) API key. Never logged or returned. */
    STRIPE_SECRET_KEY: z.string().regex(/^(sk|rk)_[A-Za-z0-9_]+$/, 'must be a Stripe secret or restricted key (sk_… / rk_…)').optional(),
    /** stripe: the webhook endpoint's signing secret (whsec_…). Never logged or returned. */
    STRIPE_WEBHOOK_SECRET: z.string().regex(/^whsec_[A-Za-z0-9_+/=]+$/, 'must be a webhook signing secret (whsec_…)').optional(),
    /** stripe: each self-serve plan's recurring price, `plan=price_id` comma-separated (developer=price_…,pro=price_…). */
    STRIPE_PRICES: z
      .string()
      .default('')
      .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
      .pipe(z.array(z.string().regex(/^[a-z0-9_-]+=price_[A-Za-z0-9_]+$/, 'entries are plan=price_id')))
      .transform((xs) => Object.fromEntries(xs.map((x) => x.split('=') as [string, string]))),
    /** stripe: metered prices (on the computer_* meters) added to every subscription, comma-separated. */
    STRIPE_METERED_PRICES: z
      .string()
      .default('')
      .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
      .pipe(z.array(z.string().regex(/^price_[A-Za-z0-9_]+$/, 'entries are price ids'))),
    /** Prometheus /metrics on its own loopback listener (docs/operations.md); unset: off. 0: any free port. */
    METRICS_PORT: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(65535)).optional(),
    /**
     * The internal listener other control-plane processes forward machine requests to (docs/cluster.md): signed
     * requests only, never the tenant-facing address. Default 127.0.0.1; on several hosts, a private address.
     */
    INTERNAL_HOST: z.string().min(1).default('127.0.0.1'),
    /** Its port; 0 (the default): a free one, chosen at start and registered for the other processes. */
    INTERNAL_PORT: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(65535)).default(0),
    /** Shown in quota errors as `upgrade_url`; null when unset. */
    UPGRADE_URL: z.url({ protocol: /^https?$/ }).optional(),
    /** When true, the client IP is the right-most X-Forwarded-For entry (one trusted proxy hop). */
    TRUST_PROXY: Bool.default(false),
    /** Where machines run: vm (QEMU), container (podman) or fake (in-memory, no desktop). Default: vm with usable KVM, else container. */
    SUBSTRATE: z.enum(['vm', 'container', 'fake']).optional(),
    /** Where built guest images are cached (default ~/.cache/computer/images). */
    IMAGE_CACHE_DIR: z.string().min(1).optional(),
    /**
     * Guest networking of new machines: outbound (the internet, never the host's own services) or none
     * (loopback only). The browser in a machine needs outbound to open anything but local pages.
     */
    MACHINE_NETWORK: z.enum(['outbound', 'none']).default('outbound'),
    /**
     * Admission control (docs/control-plane.md, "Host capacity"): machines holding compute may commit at
     * most this fraction of the host's memory and this multiple of its CPUs. Memory stays below 1 so the
     * host (control plane, podman/QEMU, page cache) keeps a reserve; vCPUs are time-shared.
     */
    MACHINE_MEMORY_COMMIT_RATIO: Ratio.default(0.9),
    /** PostgreSQL: between two attempts of a follower to lead and two liveness checks of the leader (cluster/leader.ts). */
    LEADER_INTERVAL_MS: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(50).max(60_000)).default(1000),
    /**
     * PostgreSQL: how long a process that forwards a machine's requests remembers which process drives it
     * (cluster/owner-cache.ts; 0: never). A stale entry is safe: the old driver refuses and the request is re-routed.
     */
    OWNER_CACHE_MS: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(600_000)).default(1000),
    /**
     * How long a process remembers an API key's principal (services/key-cache.ts; docs/security.md, "Remembered keys").
     * A revoked key, a removed member or a changed role stops working at once on the process that changed it and
     * within this long on every other. Default: 1000 on PostgreSQL (it saves the key's round trip on every request),
     * 0 (never) on SQLite, where the read is in-process.
     */
    AUTH_CACHE_MS: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(60_000)).optional(),
    /**
     * Warm starts (docs/api-machines.md, "Warm starts"): at most this many started-but-unassigned machines per
     * size a tenant created lately, so a plain create takes one instead of booting. 0: no pool. Container
     * substrate only (the vm substrate has none).
     */
    WARM_POOL_PER_SIZE: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(8)).default(1),
    MACHINE_CPU_COMMIT_RATIO: Ratio.default(4),
    /** vm substrate: the host bridge, its IPv4 subnet and the nameservers guests get (comma-separated). */
    VM_BRIDGE: z.string().regex(/^[A-Za-z0-9_-]{1,15}$/).optional(),
    VM_SUBNET: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/).optional(),
    VM_DNS: z
      .string()
      .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
      .pipe(z.array(z.ipv4()))
      .optional(),
  })
  .superRefine((e, ctx) => {
    if (e.INTERNAL_PORT !== 0 && (e.INTERNAL_PORT === e.PORT || e.INTERNAL_PORT === e.METRICS_PORT)) {
      ctx.addIssue({ code: 'custom', path: ['INTERNAL_PORT'], message: 'must differ from PORT and METRICS_PORT: the internal listener is never the tenant-facing one' });
    }
    if (e.BILLING_PROVIDER !== 'stripe') return;
    for (const k of ['STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET'] as const) {
      if (!e[k]) ctx.addIssue({ code: 'custom', path: [k], message: 'required when BILLING_PROVIDER=stripe' });
    }
    if (Object.keys(e.STRIPE_PRICES).length === 0) ctx.addIssue({ code: 'custom', path: ['STRIPE_PRICES'], message: 'required when BILLING_PROVIDER=stripe (plan=price_id,…)' });
  })
  .transform((e) => {
    const publicBaseUrl = (e.PUBLIC_BASE_URL ?? `http://${e.HOST.includes(':') ? `[${e.HOST}]` : e.HOST}:${e.PORT}`).replace(/\/+$/, '');
    return {
      port: e.PORT,
      host: e.HOST,
      dataDir: e.DATA_DIR,
      databaseUrl: e.DATABASE_URL ?? null,
      region: e.REGION,
      publicBaseUrl,
      publicOrigin: new URL(publicBaseUrl).origin,
      /** https public base URL: cookies are Secure and the session cookie is `__Host-computer_session`. */
      secureCookies: publicBaseUrl.startsWith('https:'),
      previewDomain: e.PREVIEW_DOMAIN ?? null,
      secretsKeyring: e.SECRETS_KEYRING ?? null,
      allowedOrigins: e.ALLOWED_ORIGINS,
      billingProvider: e.BILLING_PROVIDER,
      stripe:
        e.BILLING_PROVIDER === 'stripe'
          ? { secretKey: e.STRIPE_SECRET_KEY!, webhookSecret: e.STRIPE_WEBHOOK_SECRET!, prices: e.STRIPE_PRICES, meteredPrices: e.STRIPE_METERED_PRICES }
          : null,
      metricsPort: e.METRICS_PORT ?? null,
      internal: { host: e.INTERNAL_HOST, port: e.INTERNAL_PORT },
      upgradeUrl: e.UPGRADE_URL ?? null,
      trustProxy: e.TRUST_PROXY,
      substrate: e.SUBSTRATE ?? null,
      imageCacheDir: e.IMAGE_CACHE_DIR ?? null,
      machineNetwork: e.MACHINE_NETWORK,
      leaderIntervalMs: e.LEADER_INTERVAL_MS,
      ownerCacheMs: e.OWNER_CACHE_MS,
      authCacheMs: e.AUTH_CACHE_MS ?? (e.DATABASE_URL ? 1000 : 0),
      warmPoolPerSize: e.WARM_POOL_PER_SIZE,
      commitRatios: { memory: e.MACHINE_MEMORY_COMMIT_RATIO, cpu: e.MACHINE_CPU_COMMIT_RATIO },
      vmNetwork: {
        ...(e.VM_BRIDGE ? { bridge: e.VM_BRIDGE } : {}),
        ...(e.VM_SUBNET ? { subnet: e.VM_SUBNET } : {}),
        ...(e.VM_DNS ? { dns: e.VM_DNS } : {}),
      },
    };
  });

export type Config = z.output<typeof ConfigSchema>;

export function parseConfig(env: Record<string, string | undefined>): Config {
  const picked: Record<string, string> = {};
  for (const k of Object.keys(ConfigSchema.in.shape)) {
    const v = env[k];
    if (v !== undefined && v !== '') picked[k] = v;
  }
  return parseOrThrow(ConfigSchema, picked, 'configuration');
}

/** Is `origin` one that may make cookie-authenticated writes? */
export function isRecognisedOrigin(config: Pick<Config, 'publicOrigin' | 'allowedOrigins'>, origin: string | undefined): boolean {
  if (!origin) return false;
  return origin === config.publicOrigin || config.allowedOrigins.includes(origin);
}
