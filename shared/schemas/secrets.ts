import { z } from 'zod';
import { MACHINE_ID_RE } from '../ids.js';

export const SECRET_NAME_RE = /^[A-Z_][A-Z0-9_]*$/;
export const MAX_SECRET_NAME_CHARS = 256;
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;
/**
 * Per machine: how many secrets, and their values' total size. The whole set travels to the agent in
 * one request (JSON-escaped, up to 6 bytes per byte), which must stay under the agent's 10 MB body limit.
 */
export const MAX_SECRETS_PER_MACHINE = 100;
export const MAX_SECRETS_TOTAL_BYTES = 1024 * 1024;

// Messages never quote the input: a rejected value must not come back in the 400.
export const SecretName = z
  .string()
  .min(1)
  .max(MAX_SECRET_NAME_CHARS)
  .regex(SECRET_NAME_RE, 'secret names match ^[A-Z_][A-Z0-9_]*$');
export const SecretValue = z
  .string()
  .refine((v) => Buffer.byteLength(v, 'utf8') <= MAX_SECRET_VALUE_BYTES, 'values are at most 64 KB')
  .refine((v) => !v.includes('\0'), 'values must not contain NUL');

/** Public: store or replace one secret. */
export const SecretPut = z.strictObject({ name: SecretName, value: SecretValue });
export type SecretPut = z.infer<typeof SecretPut>;

/**
 * Public record of one stored secret. There is no value field: a stored value is never returned.
 * `delivered_at` is when this version was written into the machine's memory during its current boot,
 * null when it is not there (stored and not yet delivered, machine stopped, delivery pending).
 */
export const Secret = z.object({
  name: z.string(),
  version: z.number().int().min(1),
  delivered_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Secret = z.infer<typeof Secret>;

/** `GET /v1/machines/{id}/secrets`: every secret of one machine, by name (bounded, so not paged). */
export const MachineSecretList = z.object({ data: z.array(Secret) });
export type MachineSecretList = z.infer<typeof MachineSecretList>;

/** One entry of `GET /v1/secrets`: the organization's secret names with the machine each belongs to. */
export const OrgSecret = Secret.extend({ machine_id: z.string().regex(MACHINE_ID_RE) });
export type OrgSecret = z.infer<typeof OrgSecret>;

/** Agent: replace the whole delivered set at once. */
export const SecretsReplace = z.strictObject({
  secrets: z.record(SecretName, SecretValue).refine((m) => Object.keys(m).length <= 1000, 'at most 1000 secrets'),
});
export type SecretsReplace = z.infer<typeof SecretsReplace>;

/** What the agent answers after a delivery: names only, never a value. */
export const SecretsDelivered = z.object({ names: z.array(z.string()), delivered_at: z.string() });
export type SecretsDelivered = z.infer<typeof SecretsDelivered>;
