/**
 * Identifiers. Every id is a type prefix plus lowercase base-36 randomness, so ids are URL-safe,
 * opaque, and tell a reader (and a log) what they name. Machine ids follow the spec's
 * `^mch_[0-9a-z]{20,32}$`.
 */
import { randomInt } from 'node:crypto';

export const ID_PREFIX = {
  machine: 'mch',
  snapshot: 'snp',
  template: 'tpl',
  session: 'ses',
  preview: 'prv',
  membership: 'mem',
  invitation: 'inv',
  api_key: 'key',
  auth_session: 'aus',
  terminal: 'term',
  event: 'evt',
  organization: 'org',
  user: 'usr',
  request: 'req',
  layer: 'lyr',
  disk: 'dsk',
  usage: 'use',
  host: 'host',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
export const ID_RANDOM_LENGTH = 24;

export function randomBase36(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

export function newId(kind: IdKind): string {
  return `${ID_PREFIX[kind]}_${randomBase36(ID_RANDOM_LENGTH)}`;
}

export const MACHINE_ID_RE = /^mch_[0-9a-z]{20,32}$/;

export function isMachineId(v: string): boolean {
  return MACHINE_ID_RE.test(v);
}

/** The shape of an id of `kind` as a regular expression source (also the OpenAPI pattern of its path parameter). */
export function idPattern(kind: IdKind): string {
  return `^${ID_PREFIX[kind]}_[0-9a-z]{20,32}$`;
}

/** True when `v` looks like an id of `kind` (prefix plus 20-32 base-36 characters). */
export function isIdOf(kind: IdKind, v: string): boolean {
  return new RegExp(idPattern(kind)).test(v);
}
