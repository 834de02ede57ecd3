/**
 * The tests' TypeScript transpiler (tsconfig.json's `ts-node.transpiler`): ts-node's own transpile-only
 * emit, kept on disk by content so each test process does not transpile again the ~400 modules its imports reach
 * (measured: importing test/helpers/substrate-rigs.ts cost ~9 s of CPU per process, about 23 ms a module; with
 * some 190 test files that was most of the suite's start-up time). The key is everything the output depends on:
 * the TypeScript version, the file name (it is in the source map), the emit kind (ESM or CommonJS), the compiler
 * options and the source text, so a changed file, option or compiler is transpiled afresh and stale entries are
 * merely unused. Output with diagnostics (a syntax error) is never cached: ts-node reports it as before.
 * The cache lives in `.cache/ts-transpile/` (git-ignored); deleting it is always safe. Plain CommonJS: ts-node
 * `require`s its transpiler.
 */
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const CACHE_DIR = path.join(__dirname, '..', '.cache', 'ts-transpile');
/** Bump to drop every entry written by an older version of this file. */
const FORMAT = 1;

/** ts-node's own transpile function (not in its package exports, so by path from the package's location). */
function tsNodeTranspileModule() {
  const fromTap = createRequire(require.resolve('@tapjs/typescript/package.json', { paths: [path.join(__dirname, '..')] }));
  const pkg = fromTap.resolve('@isaacs/ts-node-temp-fork-for-pr-2009/package.json');
  return require(path.join(path.dirname(pkg), 'dist', 'ts-transpile-module.js')).createTsTranspileModule;
}

function read(file) {
  try {
    const entry = JSON.parse(fs.readFileSync(file, 'utf8'));
    return typeof entry.outputText === 'string' ? entry : null;
  } catch {
    return null;
  }
}

/** Written beside its name and renamed over it, so a parallel test process never reads half an entry. */
function write(file, entry) {
  try {
    fs.mkdirSync(CACHE_DIR, { recursive: true });
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(entry));
    fs.renameSync(tmp, file);
  } catch {
    // A cache that cannot be written only costs the transpile next time.
  }
}

/** @param {{ service: { config: { options: object } }, nodeModuleEmitKind?: string }} opts */
exports.create = function create(opts) {
  const ts = require(createRequire(path.join(__dirname, '..', 'package.json')).resolve('typescript'));
  const compilerOptions = opts.service.config.options;
  const packageJsonType = opts.nodeModuleEmitKind === 'nodeesm' ? 'module' : 'commonjs';
  const transpile = tsNodeTranspileModule()(ts, { compilerOptions, reportDiagnostics: true });
  const optionsKey = JSON.stringify([FORMAT, ts.version, packageJsonType, compilerOptions]);
  return {
    transpile(input, { fileName }) {
      const key = crypto.createHash('sha256').update(optionsKey).update('\0').update(fileName).update('\0').update(input).digest('hex');
      const file = path.join(CACHE_DIR, `${key}.json`);
      const cached = read(file);
      if (cached) return { outputText: cached.outputText, sourceMapText: cached.sourceMapText, diagnostics: [] };
      const out = transpile(input, { fileName }, packageJsonType);
      if (!out.diagnostics || out.diagnostics.length === 0) write(file, { outputText: out.outputText, sourceMapText: out.sourceMapText });
      return out;
    },
  };
};
