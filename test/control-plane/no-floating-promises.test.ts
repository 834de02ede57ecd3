/**
 * The guard against forgotten awaits (issue 24 item 1): the store is asynchronous, so a store call without `await`
 * runs unobserved, or a promise stands where its value was meant. The checker (test/helpers/floating-promises.ts)
 * must find each planted mistake of a literal fixture, and nothing in control-plane/src, scripts or test.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { findFloatingPromises, programFor } from '../helpers/floating-promises.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const FIXTURE = `
declare const store: { get(id: string): Promise<{ n: number } | undefined>; put(id: string): Promise<void>; has(id: string): Promise<boolean>; peek(id: string): { n: number } | undefined };
declare const maybe: Promise<void> | undefined;
declare function log(v: unknown): void;
declare function json<T extends string | number | { [k: string]: string }>(v: T): void;
declare const t: { throws(fn: () => unknown): void; doesNotThrow(fn: () => unknown): void };
export async function planted(ids: string[]): Promise<unknown> {
  store.put('a');
  if (store.has('a')) return 1;
  const n = store.get('a') ?? null;
  const missing = !store.get('b');
  const pick = store.has('c') ? 1 : 2;
  const both = store.has('d') && n;
  ids.forEach((id) => store.put(id));
  const kept = ids.filter((id) => store.has(id));
  ids.forEach(async (id) => { await store.put(id); });
  while (store.has('e')) break;
  log({ rows: store.get('f') });
  const said = \`\${store.get('g')}\`;
  log(store.get('h'));
  json(store.get('i'));
  t.throws(() => store.put('j'));
  void [n, missing, pick, both, kept, said];
}
export async function fine(ids: string[]): Promise<unknown> {
  await store.put('a');
  void store.put('b');
  store.put('c').catch(() => undefined);
  store.put('d').then(() => 1, () => 2);
  let later: Promise<void> | undefined;
  later = store.put('e');
  if (maybe) await maybe;
  if (await store.has('f')) return 1;
  const n = (await store.get('g')) ?? null;
  if (store.peek('h')) return 2;
  await Promise.all(ids.map((id) => store.put(id)));
  await Promise.all([store.put('i'), store.get('j')]);
  const chains = new Map<string, Promise<void>>();
  chains.set('k', store.put('k'));
  await Promise.resolve(store.get('l'));
  const around = [store.get('m'), store.get('n')];
  await Promise.all(around);
  return { n, later, chains };
}
`;

t.test('finds each planted forgotten await, and nothing in correct code', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floating-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'fixture.ts'), FIXTURE);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022'], strict: true, types: [] }, include: ['fixture.ts'] }),
  );
  const found = findFloatingPromises(programFor(path.join(dir, 'tsconfig.json')), (f) => f.endsWith('fixture.ts'), dir);
  t.same(
    found.map((f) => `${f.line} ${f.kind} ${f.text}`),
    [
      "8 floating store.put('a')",
      "9 condition store.has('a')",
      "10 condition store.get('a')",
      "11 condition store.get('b')",
      "12 condition store.has('c')",
      "13 condition store.has('d')",
      '14 callback (id) => store.put(id)',
      '15 callback (id) => store.has(id)',
      '16 callback async (id) => { await store.put(id); }',
      "17 condition store.has('e')",
      "18 value store.get('f')",
      "19 value store.get('g')",
      "20 value store.get('h')",
      "21 value store.get('i')",
      "22 callback () => store.put('j')",
    ],
  );
});

t.test('no forgotten await in the control plane, its scripts or its tests', async (t) => {
  const program = programFor(path.join(ROOT, 'tsconfig.test.json'));
  const mine = (f: string) => /\/(control-plane\/src|scripts|test)\//.test(path.relative(ROOT, f).replace(/^/, '/')) && !f.includes('node_modules');
  const found = findFloatingPromises(program, mine, ROOT);
  t.same(found.map((f) => `${f.file}:${f.line} ${f.kind} ${f.text}`), []);
});
