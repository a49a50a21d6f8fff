// npm start: the one-machine default. Checks PostgreSQL and Redis, creates the database if absent,
// applies migrations, then runs the web process and every worker pool, restarting nothing silently.
import { spawn, type ChildProcess } from 'node:child_process';
import { getConfig } from '../shared/config.js';
import { createDataSource, runMigrations } from '../shared/db/data-source.js';
import { ensureDatabase, ensureRedis, PreflightError } from './preflight.js';

const config = getConfig();
try {
  await ensureDatabase(config.databaseUrl);
  await ensureRedis(config.redisUrl);
} catch (err) {
  process.stderr.write(`cannot start: ${err instanceof PreflightError ? err.message : String(err)}\n`);
  process.exit(1);
}
const ds = createDataSource({ poolSize: 2, statementTimeoutMs: 0 });
await ds.initialize();
await runMigrations(ds);
await ds.destroy();

// node itself (tsx as its loader, no wrapper process): the SIGTERM sent below reaches the process that drains.
const children: ChildProcess[] = [
  spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], { stdio: 'inherit' }),
  spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', 'all'], { stdio: 'inherit' }),
];
let exiting = false;
const stopAll = (signal: NodeJS.Signals) => {
  if (exiting) return;
  exiting = true;
  for (const child of children) child.kill(signal);
};
for (const child of children) {
  child.on('exit', (code) => {
    if (!exiting) {
      process.stderr.write(`a process exited (code ${code}); stopping the others\n`);
      stopAll('SIGTERM');
    }
    if (children.every((c) => c.exitCode !== null || c.signalCode !== null)) process.exit(code ?? 0);
  });
}
process.on('SIGTERM', () => stopAll('SIGTERM'));
process.on('SIGINT', () => stopAll('SIGTERM'));
