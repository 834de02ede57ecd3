// Prints the failing tests of a tap run again, compactly: each file with a failure, then each failing
// assertion's line and its diagnostics block. .ci/run calls it after a red `npm test`, so the failure is in the
// tail that CI shows. Usage: node scripts/ci-failures.mjs LOG
import { readFileSync } from 'node:fs';

const path = process.argv[2];
if (path === undefined) {
  console.error('usage: node scripts/ci-failures.mjs LOG');
  process.exit(2);
}
const lines = readFileSync(path, 'utf8').split('\n');
const out = [];
let file = '';
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const top = /^# Subtest: (\S+\.test\.ts)/.exec(line);
  if (top) file = top[1];
  if (!/^\s*not ok /.test(line)) continue;
  out.push(`${file}: ${line.trim()}`);
  // The diagnostics block (YAML between '---' and '...') that tap prints under a failing assertion.
  if (lines[i + 1] !== undefined && lines[i + 1].trim() === '---') {
    for (let j = i + 1; j < lines.length && j < i + 40; j++) {
      out.push(`    ${lines[j]}`);
      if (lines[j].trim() === '...') break;
    }
  }
}
console.log('\n# ===== failing tests (again, from the log above) =====');
console.log(out.length === 0 ? '# none found in the log (a crash before tap reported?)' : out.slice(0, 300).join('\n'));
