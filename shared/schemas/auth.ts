import { z } from 'zod';

/** E-mail addresses are compared case-insensitively: they are stored trimmed and lowercased. */
export const Email = z.string().trim().toLowerCase().max(254).pipe(z.email('must be an e-mail address'));

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;
/** New passwords: long enough to resist online guessing; capped so hashing stays bounded. */
export const NewPassword = z.string().min(MIN_PASSWORD_LENGTH).max(MAX_PASSWORD_LENGTH);

export const SignupRequest = z.strictObject({
  email: Email,
  password: NewPassword,
  name: z.string().trim().min(1).max(100).optional(),
});
export type SignupRequest = z.infer<typeof SignupRequest>;

export const LoginRequest = z.strictObject({
  email: Email,
  password: z.string().min(1).max(MAX_PASSWORD_LENGTH),
});
export type LoginRequest = z.infer<typeof LoginRequest>;

export const SwitchOrganizationRequest = z.strictObject({
  organization_id: z.string().min(1).max(64),
});
export type SwitchOrganizationRequest = z.infer<typeof SwitchOrganizationRequest>;

/** The cookie that carries a browser session on a plain-http deployment. HttpOnly: never readable from scripts. */
export const SESSION_COOKIE = 'computer_session';
/**
 * Its name when the public base URL is https: a `__Host-` cookie, which browsers accept only host-only,
 * Secure and with `Path=/`, so a page on a sibling subdomain (a preview) cannot set one for the API.
 */
export const SECURE_SESSION_COOKIE = '__Host-computer_session';
