// npm run migrate: applies pending migrations (Procfile `release`).
import { createDataSource, runMigrations } from '../shared/db/data-source.js';
import { ensureDatabase } from './preflight.js';
import { configureFor, getConfig } from '../shared/config.js';
import { NEEDS } from '../shared/config-processes.js';

// The release phase needs DATABASE_URL alone, whatever else the app's other processes are given.
configureFor(NEEDS.release, 'the release phase (migrate)');

await ensureDatabase(getConfig().databaseUrl);
const ds = createDataSource({ poolSize: 2, statementTimeoutMs: 0 });
await ds.initialize();
const applied = await runMigrations(ds);
await ds.destroy();
process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'migrations: up to date\n');
