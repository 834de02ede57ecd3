import { z } from 'zod';

export const SECRET_NAME_RE = /^[A-Z_][A-Z0-9_]*$/;
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;

export const SecretName = z.string().min(1).max(256).regex(SECRET_NAME_RE, 'secret names match ^[A-Z_][A-Z0-9_]*$');
export const SecretValue = z
  .string()
  .refine((v) => Buffer.byteLength(v, 'utf8') <= MAX_SECRET_VALUE_BYTES, 'values are at most 64 KB')
  .refine((v) => !v.includes('\0'), 'values must not contain NUL');

/** Public: store or replace one secret. */
export const SecretPut = z.strictObject({ name: SecretName, value: SecretValue });
export type SecretPut = z.infer<typeof SecretPut>;

/** Agent: replace the whole delivered set at once. */
export const SecretsReplace = z.strictObject({
  secrets: z.record(SecretName, SecretValue).refine((m) => Object.keys(m).length <= 1000, 'at most 1000 secrets'),
});
export type SecretsReplace = z.infer<typeof SecretsReplace>;

/** What the agent answers after a delivery: names only, never a value. */
export const SecretsDelivered = z.object({ names: z.array(z.string()), delivered_at: z.string() });
export type SecretsDelivered = z.infer<typeof SecretsDelivered>;
