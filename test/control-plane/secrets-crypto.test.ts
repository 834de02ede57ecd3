/**
 * Secrets at rest: AES-256-GCM sealing under a keyring (control-plane/src/secrets/crypto.ts) and the
 * keyring file (keyring-file.ts). Real node:crypto, real files; expected values pinned literally.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCipheriv } from 'node:crypto';
import {
  bindingAad, newKeyring, open, parseKeyring, retireUnusedKeys, seal, serializeKeyring, withNewActiveKey, SecretOpenError, type Keyring,
} from '../../control-plane/src/secrets/crypto.js';
import { KeyringFile, keyringPath, openKeyring } from '../../control-plane/src/secrets/keyring-file.js';

const NOW = new Date('2026-11-22T06:00:00.000Z');
const B = { org_id: 'org_aaaaaaaaaaaaaaaaaaaaaaaa', machine_id: 'mch_bbbbbbbbbbbbbbbbbbbbbbbb', name: 'DB_PASSWORD', version: 3 };
const VALUE = 'hunter2 — ünïcode \n and a newline';

const reason = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    if (e instanceof SecretOpenError) return e.reason;
    throw e;
  }
  return 'opened';
};

t.test('seal/open round trip; the blob is iv ‖ tag ‖ ciphertext and never holds the plaintext', async (t) => {
  const k = newKeyring(NOW);
  const s = seal(k, B, VALUE);
  t.equal(s.key_id, k.active, 'sealed under the active key');
  t.match(s.key_id, /^kr_[0-9a-f]{16}$/);
  t.equal(s.blob.length, 12 + 16 + Buffer.byteLength(VALUE), 'iv 12 + tag 16 + ciphertext');
  t.notOk(s.blob.includes(Buffer.from('hunter2')), 'no plaintext in the blob');
  t.equal(open(k, s, B), VALUE);
  t.not(seal(k, B, VALUE).blob.toString('hex'), s.blob.toString('hex'), 'a fresh iv every time');
  t.equal(open(k, seal(k, B, ''), B), '', 'the empty value');
});

t.test('the format is standard AES-256-GCM with the documented associated data', async (t) => {
  const key = Buffer.alloc(32, 7);
  const k: Keyring = { active: 'kr_0000000000000001', keys: [{ id: 'kr_0000000000000001', created_at: NOW.toISOString(), key }] };
  t.equal(
    bindingAad(B).toString('utf8'),
    '["computer.secret/1","org_aaaaaaaaaaaaaaaaaaaaaaaa","mch_bbbbbbbbbbbbbbbbbbbbbbbb","DB_PASSWORD",3]',
  );
  // Sealed independently with node:crypto: our open() must accept it.
  const iv = Buffer.alloc(12, 1);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from('["computer.secret/1","org_aaaaaaaaaaaaaaaaaaaaaaaa","mch_bbbbbbbbbbbbbbbbbbbbbbbb","DB_PASSWORD",3]'));
  const ct = Buffer.concat([c.update('s3cret', 'utf8'), c.final()]);
  t.equal(open(k, { key_id: 'kr_0000000000000001', blob: Buffer.concat([iv, c.getAuthTag(), ct]) }, B), 's3cret');
});

t.test('tampering is refused: ciphertext, tag, iv, and every part of the binding', async (t) => {
  const k = newKeyring(NOW);
  const s = seal(k, B, VALUE);
  for (const [what, at] of [['iv', 0], ['tag', 12], ['ciphertext', 30]] as const) {
    const blob = Buffer.from(s.blob);
    blob[at] = blob[at]! ^ 1;
    t.equal(reason(() => open(k, { key_id: s.key_id, blob }, B)), 'authentication_failed', `a flipped ${what} bit`);
  }
  t.equal(reason(() => open(k, { key_id: s.key_id, blob: s.blob.subarray(0, s.blob.length - 1) }, B)), 'authentication_failed', 'truncated');
  t.equal(reason(() => open(k, { key_id: s.key_id, blob: s.blob.subarray(0, 20) }, B)), 'malformed', 'shorter than iv + tag');
  const others = {
    'another organization': { ...B, org_id: 'org_cccccccccccccccccccccccc' },
    'another machine': { ...B, machine_id: 'mch_cccccccccccccccccccccccc' },
    'another name': { ...B, name: 'DB_PASSWORD2' },
    'an older version': { ...B, version: 2 },
  };
  for (const [what, b] of Object.entries(others)) t.equal(reason(() => open(k, s, b)), 'authentication_failed', `copied to ${what}`);
});

t.test('a key id the keyring lacks, or another keyring under the same id, does not open', async (t) => {
  const k = newKeyring(NOW);
  const s = seal(k, B, VALUE);
  t.equal(reason(() => open(k, { ...s, key_id: 'kr_ffffffffffffffff' }, B)), 'unknown_key');
  const other = newKeyring(NOW);
  const impostor: Keyring = { active: s.key_id, keys: [{ ...other.keys[0]!, id: s.key_id }] };
  t.equal(reason(() => open(impostor, s, B)), 'authentication_failed', 'same id, different key');
  const e = (() => {
    try {
      open(k, { ...s, key_id: 'kr_ffffffffffffffff' }, B);
    } catch (x) {
      return x as Error;
    }
  })()!;
  t.notMatch(e.message, /hunter2|DB_PASSWORD|kr_/, 'the error names neither the value, the name nor the key');
});

t.test('rotation: old ciphertexts open until re-sealed, then the old key can retire', async (t) => {
  const k1 = newKeyring(NOW);
  const old = seal(k1, B, VALUE);
  const k2 = withNewActiveKey(k1, NOW);
  t.not(k2.active, k1.active, 'a new active key');
  t.equal(k2.keys.length, 2);
  t.equal(open(k2, old, B), VALUE, 'the old key still opens');
  const fresh = seal(k2, B, VALUE);
  t.equal(fresh.key_id, k2.active);
  const kept = retireUnusedKeys(k2, new Set([old.key_id, fresh.key_id]));
  t.same(kept.retired, [], 'a key some ciphertext names stays');
  const { keyring: k3, retired } = retireUnusedKeys(k2, new Set([fresh.key_id]));
  t.same(retired, [k1.active]);
  t.same(k3.keys.map((x) => x.id), [k2.active]);
  t.equal(reason(() => open(k3, old, B)), 'unknown_key', 'the retired key is gone');
  t.equal(open(k3, fresh, B), VALUE);
  t.same(retireUnusedKeys(k3, new Set()).keyring.keys.map((x) => x.id), [k2.active], 'the active key never retires');
});

t.test('keyring text: round trip, and bad files refused without quoting them', async (t) => {
  const k = withNewActiveKey(newKeyring(NOW), NOW);
  const text = serializeKeyring(k);
  const back = parseKeyring(text);
  t.equal(back.active, k.active);
  t.same(back.keys.map((x) => x.key.toString('hex')), k.keys.map((x) => x.key.toString('hex')));
  const j = JSON.parse(text);
  t.equal(j.format, 'computer-secrets-keyring/1');
  const secretKey = j.keys[0].key as string;
  const bad = [
    'not json',
    JSON.stringify({ ...j, active: 'kr_9999999999999999' }),
    JSON.stringify({ ...j, keys: [{ ...j.keys[0], key: 'c2hvcnQ=' }] }),
    JSON.stringify({ ...j, keys: [j.keys[0], j.keys[0]] }),
    JSON.stringify({ ...j, format: 'other/1' }),
    JSON.stringify({ ...j, keys: [] }),
  ];
  for (const b of bad) {
    t.throws(() => parseKeyring(b));
    try {
      parseKeyring(b);
    } catch (e) {
      t.notOk((e as Error).message.includes(secretKey), 'no key material in the message');
    }
  }
});

t.test('keyring file: created 0600 on first run (and said), an explicit path must exist, others may not read it, changes are picked up', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-keyring-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  t.equal(keyringPath({ secretsKeyring: 'off', dataDir: dir }), null, 'off');
  t.equal(openKeyring({ secretsKeyring: 'off', dataDir: dir }), null);
  const said: string[] = [];
  const f = openKeyring({ secretsKeyring: null, dataDir: dir }, (l) => said.push(l))!;
  t.equal(f.path, path.join(dir, 'secrets-keyring.json'));
  t.equal(fs.statSync(f.path).mode & 0o777, 0o600, 'mode 0600');
  t.equal(said.length, 1);
  t.match(said[0], /created the keyring .*secrets-keyring\.json \(mode 0600\)/);
  const first = f.current().active;
  // A second process on the same data directory finds it and does not replace it.
  const again = openKeyring({ secretsKeyring: null, dataDir: dir }, (l) => said.push(l))!;
  t.equal(again.current().active, first, 'the same key');
  t.equal(said.length, 1, 'said once');
  t.equal(fs.readdirSync(dir).length, 1, 'no temporary files left');
  // Exclusive creation: a racing creator loses and keeps the first key.
  t.equal(new KeyringFile(f.path).createIfAbsent(newKeyring(NOW)), false);
  t.equal(f.current().active, first);

  t.throws(() => openKeyring({ secretsKeyring: path.join(dir, 'missing.json'), dataDir: dir }), /does not exist/, 'an explicit path is never invented');

  // Picked up when the file changes under a running reader (the CLI rotates while the server runs).
  const reader = new KeyringFile(f.path);
  t.equal(reader.current().active, first);
  f.write(withNewActiveKey(f.current(), NOW));
  t.not(reader.current().active, first, 'the reader sees the rotated keyring');
  t.equal(fs.statSync(f.path).mode & 0o777, 0o600, 'still 0600 after a rewrite');

  fs.chmodSync(f.path, 0o644);
  t.throws(() => new KeyringFile(f.path).current(), /chmod 600/, 'readable by others: refused');
});
