/**
 * Issue #10 item 9: the agent's credential (agent/src/enrollment.ts). Who may enroll a fresh agent process,
 * that a one-time secret is consumed whatever happens, and that a key is only ever replaced by its holder.
 * The host side of the secret (dropEnrollmentSecret) is the container substrate's own code.
 */
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Enrollment, takeSecretFile } from '../../agent/src/enrollment.js';
import { dropEnrollmentSecret, ENROLL_FILE_NAME } from '../../control-plane/src/substrate/substrate.js';

const KEY = 'k'.repeat(43);
const KEY2 = 'm'.repeat(43);

function channelDir(t: Test): { dir: string; file: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'enroll-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, file: path.join(dir, ENROLL_FILE_NAME) };
}

t.test('file: a fresh agent accepts only the secret the host dropped, once', async (t) => {
  const { dir, file } = channelDir(t);
  const e = new Enrollment({ kind: 'file', path: file });
  t.equal(e.authorized(KEY), false, 'nothing is authorized before enrollment');
  t.equal(e.enroll(KEY, KEY), false, 'no secret dropped: refused');

  const secret = dropEnrollmentSecret(dir);
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'the dropped secret is 0600');
  t.equal(fs.readdirSync(dir).length, 1, 'no temporary file left beside it');
  t.equal(e.enroll('not-the-secret-' + 'x'.repeat(20), KEY), false, 'a wrong proof is refused');
  t.notOk(fs.existsSync(file), 'and the secret it was checked against is gone with it');
  t.equal(e.enroll(secret, KEY), false, 'so the real secret no longer works either');

  const next = dropEnrollmentSecret(dir);
  t.equal(e.enroll(next, KEY), true, 'a fresh secret enrolls');
  t.notOk(fs.existsSync(file), 'consumed');
  t.equal(e.authorized(KEY), true);
  t.equal(e.authorized(KEY2), false);
  t.equal(e.authorized(null), false);

  // Once enrolled, only the key's holder replaces it: a secret (even a freshly dropped one) is not accepted.
  const late = dropEnrollmentSecret(dir);
  t.equal(e.enroll(late, KEY2), false, 'a secret cannot replace an installed key');
  t.equal(e.enroll(KEY, KEY2), true, 'the holder rotates it');
  t.equal(e.authorized(KEY), false, 'the old key is dead');
  t.equal(e.authorized(KEY2), true);
});

t.test('file: what is not a secret the host wrote is refused and removed', async (t) => {
  const { dir, file } = channelDir(t);
  const e = new Enrollment({ kind: 'file', path: file });
  const secret = 's'.repeat(43);

  fs.writeFileSync(file, secret, { mode: 0o644 });
  t.equal(e.enroll(secret, KEY), false, 'readable by others: refused');
  t.notOk(fs.existsSync(file), 'and removed');

  const elsewhere = path.join(dir, 'elsewhere');
  fs.writeFileSync(elsewhere, secret, { mode: 0o600 });
  fs.symlinkSync(elsewhere, file);
  t.equal(e.enroll(secret, KEY), false, 'a symlink is not followed');
  t.equal(fs.readFileSync(elsewhere, 'utf8'), secret, 'its target is untouched');
  t.notOk(fs.existsSync(file), 'the link itself is consumed');

  fs.writeFileSync(file, 'short', { mode: 0o600 });
  t.equal(e.enroll('short', KEY), false, 'too short to be a secret');
  fs.writeFileSync(file, 'x'.repeat(2000), { mode: 0o600 });
  t.equal(e.enroll('x'.repeat(2000), KEY), false, 'larger than any secret');
  fs.mkdirSync(file);
  t.equal(takeSecretFile(file), null, 'a directory is no secret');
  t.equal(e.enrolled, false);
});

t.test('host side: a planted link never redirects the host write', async (t) => {
  const { dir, file } = channelDir(t);
  const victim = path.join(os.tmpdir(), `victim-${process.pid}`);
  fs.writeFileSync(victim, 'host file');
  t.teardown(() => fs.rmSync(victim, { force: true }));
  fs.symlinkSync(victim, file);
  const secret = dropEnrollmentSecret(dir);
  t.equal(fs.readFileSync(victim, 'utf8'), 'host file', 'the link target is not written');
  t.equal(fs.lstatSync(file).isFile(), true, 'the link itself is replaced by the secret');
  t.equal(fs.readFileSync(file, 'utf8'), secret);
});

t.test('channel: the first enrollment of a fresh agent is the host\'s; after it only the key holder', async (t) => {
  const e = new Enrollment({ kind: 'channel' });
  t.equal(e.authorized(null), false);
  t.equal(e.enroll(null, KEY), true, 'a host-only channel needs no secret');
  t.equal(e.enroll(null, KEY2), false, 'a second enrollment without the key is refused');
  t.equal(e.enroll(KEY2, KEY2), false);
  t.equal(e.authorized(KEY), true);
});
