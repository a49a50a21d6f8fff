// Runs before `npm start`, `npm run migrate`, `npm run admin` and `npm test`. In development it installs dependencies
// when they are missing or older than the lockfile. With NODE_ENV=production it installs nothing (the platform's build
// did, without the development tools) and only checks that `npm run build` has made dist/, which production runs.
// Plain JavaScript on purpose: it must run before anything is installed.
import { execSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

if (process.env.NODE_ENV === 'production') {
  if (!existsSync('dist/api/main.js')) {
    process.stderr.write('NODE_ENV=production runs the compiled service in dist/, which is missing: run npm run build first\n');
    process.exit(1);
  }
  process.exit(0);
}
const installed = 'node_modules/.package-lock.json';
const stale = !existsSync('node_modules/.bin/tsx') || !existsSync(installed) || statSync('package-lock.json').mtimeMs > statSync(installed).mtimeMs;
if (stale) {
  process.stderr.write('installing dependencies (npm install)...\n');
  // npm install, not npm ci: this registry lacks optional platform builds the lockfile leaves out.
  execSync('npm install --no-audit --no-fund', { stdio: 'inherit' });
}
