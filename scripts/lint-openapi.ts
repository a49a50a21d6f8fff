// Lints the document the service serves: Redocly's recommended rules, then the OWASP ruleset (.spectral.yaml).
// Errors fail; warnings are printed by rule (docs/spec-lint.md says why each kind is left).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildDocument } from '../api/openapi/document.js';
import { routes, schemas } from '../api/routes/index.js';

const root = join(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'rampway-openapi-'));
const file = join(dir, 'openapi.json');
writeFileSync(file, JSON.stringify(buildDocument(routes, schemas), null, 1));

function run(bin: string, args: string[]): { status: number; out: string } {
  const r = spawnSync(join(root, 'node_modules', '.bin', bin), args, { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: r.status ?? 1, out: `${r.stdout}${r.stderr}` };
}

let failed = false;
const redocly = run('redocly', ['lint', file, '--format=stylish']);
const redoclyLines = redocly.out.split('\n').filter((l) => /error|warning|valid/i.test(l) && !/Node\.js|nodejs|deprecat/i.test(l));
console.log(`redocly lint: ${redocly.status === 0 ? 'no errors' : 'ERRORS'}\n${redoclyLines.map((l) => `  ${l.trim()}`).join('\n')}`);
if (redocly.status !== 0) failed = true;

const spectral = run('spectral', ['lint', '-r', join(root, '.spectral.yaml'), '-f', 'json', '-q', file]);
let results: { code: string; severity: number; path: string[]; message: string }[];
try {
  results = JSON.parse(spectral.out.slice(spectral.out.indexOf('[')));
} catch {
  console.error(`spectral did not run:\n${spectral.out}`);
  process.exit(1);
}
const errors = results.filter((r) => r.severity === 0);
const warnings = new Map<string, number>();
for (const r of results.filter((x) => x.severity === 1)) warnings.set(r.code, (warnings.get(r.code) ?? 0) + 1);
console.log(`spectral (OWASP): ${errors.length} errors, ${results.length - errors.length} warnings`);
for (const [code, n] of [...warnings].sort()) console.log(`  warning ${code}: ${n}`);
for (const e of errors) console.log(`  ERROR ${e.code} at ${e.path.join('.')}: ${e.message}`);
if (errors.length) failed = true;

rmSync(dir, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
