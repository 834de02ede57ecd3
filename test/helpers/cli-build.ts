/**
 * The `computer` CLI as plain JavaScript for tests that run it as a process: shared/ and clients/ transpiled
 * (no type check; `npm run typecheck` does that) into a temporary directory inside the repository, so its
 * imports of zod and ws resolve through the repository's node_modules. Removed at teardown.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function tsFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/** Answers the path of the CLI's main.js. */
export function buildCli(t: { teardown(fn: () => void): void }): string {
  const out = fs.mkdtempSync(path.join(REPO, '.cli-build-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  for (const file of [...tsFiles(path.join(REPO, 'shared')), ...tsFiles(path.join(REPO, 'clients'))]) {
    const js = ts.transpileModule(fs.readFileSync(file, 'utf8'), {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022 },
      fileName: file,
    }).outputText;
    const dest = path.join(out, path.relative(REPO, file)).replace(/\.ts$/, '.js');
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, js);
  }
  return path.join(out, 'clients/cli/src/main.js');
}
