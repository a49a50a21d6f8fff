// npm run build: compiles the service to dist/ (tsc, with source maps), the JavaScript production runs: the Procfile,
// the Docker image and `npm start` with NODE_ENV=production. tsx stays a development tool. The reference's guide
// chapters (api/openapi/descriptions.ts reads them beside the code) are copied next to it.
// Plain JavaScript: it runs where only the build's dependencies are installed.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
for (const file of readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'))) cpSync(join(root, 'docs', file), join(dist, 'docs', file));
process.stdout.write('build: dist/ ready (node dist/api/main.js, node dist/workers/main.js <pools>)\n');
