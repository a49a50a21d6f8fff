// Builds the installable package into dist/ with the package's own TypeScript: ES modules and their declarations
// (dist/esm, type-checked by tsc), and a CommonJS copy for require() (dist/cjs). Runs on `npm pack` (prepack) and on
// the repository's `npm install` (its prepare, with --if-typescript: an install without dev dependencies skips it), so
// a checkout's folder installs too. No TypeScript is needed where the package is used.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const here = import.meta.dirname;
const require = createRequire(import.meta.url);
let ts;
try {
  ts = require('typescript');
} catch (err) {
  if (!process.argv.includes('--if-typescript')) throw err;
  console.log('@rampway/client not built: TypeScript is not installed (an install without dev dependencies)');
  process.exit(0);
}
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });

const esm = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(here, 'tsconfig.build.json')], { stdio: 'inherit' });
if (esm.status !== 0) process.exit(esm.status ?? 1);

// The generated types are a declaration file already: tsc does not copy it, so it goes beside each index.d.ts.
const cjs = join(dist, 'cjs');
mkdirSync(cjs, { recursive: true });
for (const dir of ['esm', 'cjs']) copyFileSync(join(here, 'src', 'schema.d.ts'), join(dist, dir, 'schema.d.ts'));
copyFileSync(join(dist, 'esm', 'index.d.ts'), join(cjs, 'index.d.ts'));
const source = readFileSync(join(here, 'src', 'index.ts'), 'utf8');
const { outputText } = ts.transpileModule(source, {
  fileName: 'index.ts',
  compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
});
writeFileSync(join(cjs, 'index.js'), outputText);
// dist/cjs is CommonJS whatever the package's "type" says, for Node and for TypeScript reading its declarations.
writeFileSync(join(cjs, 'package.json'), `${JSON.stringify({ type: 'commonjs' })}\n`);
console.log(`@rampway/client built with TypeScript ${ts.version}: dist/esm (ESM + .d.ts), dist/cjs (CommonJS + .d.ts)`);
