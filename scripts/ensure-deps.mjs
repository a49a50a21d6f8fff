// Runs before `npm start` and `npm test`: installs dependencies when they are missing or older than the lockfile.
// Plain JavaScript on purpose: it must run before anything is installed.
import { execSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const installed = 'node_modules/.package-lock.json';
const stale = !existsSync('node_modules/.bin/tsx') || !existsSync(installed) || statSync('package-lock.json').mtimeMs > statSync(installed).mtimeMs;
if (stale) {
  process.stderr.write('installing dependencies (npm install)...\n');
  // npm install, not npm ci: this registry lacks optional platform builds the lockfile leaves out.
  execSync('npm install --no-audit --no-fund', { stdio: 'inherit' });
}
