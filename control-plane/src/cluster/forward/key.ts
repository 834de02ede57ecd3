/**
 * The deployment key: the one secret every control-plane process of a deployment shares, with which each signs
 * the requests it forwards to another and checks the ones it receives (docs/cluster.md, "The deployment key").
 * Generated once and kept in the database (read at start); handed in here as bytes. The bytes stay in a private
 * field: a key printed, logged or serialised shows nothing.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** HMAC-SHA256 keys shorter than the hash's output weaken it (RFC 2104 §3). */
export const DEPLOYMENT_KEY_MIN_BYTES = 32;

export class DeploymentKey {
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    if (bytes.length < DEPLOYMENT_KEY_MIN_BYTES) throw new RangeError(`a deployment key has at least ${DEPLOYMENT_KEY_MIN_BYTES} bytes`);
    this.#bytes = Buffer.from(bytes);
  }

  /** A fresh random key (what a deployment's first process stores). */
  static generate(): DeploymentKey {
    return new DeploymentKey(randomBytes(DEPLOYMENT_KEY_MIN_BYTES));
  }

  /** HMAC-SHA256 of `text` under the key. */
  mac(text: string): Buffer {
    return createHmac('sha256', this.#bytes).update(text, 'utf8').digest();
  }

  /** Whether `mac` is the MAC of `text`, compared in constant time. */
  verifies(text: string, mac: Buffer): boolean {
    const expected = this.mac(text);
    return mac.length === expected.length && timingSafeEqual(mac, expected);
  }

  toJSON(): string {
    return '[deployment key]';
  }
}
