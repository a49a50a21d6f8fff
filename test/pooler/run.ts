// npm run test:pooler (part of .ci/run): the sandbox lifecycle tests again, with the service connected through a
// PgBouncer in transaction mode with its defaults (test/helpers/pgbouncer.ts: only the [databases] entry, nothing
// ignored), migrations included. Fails when a test fails or PgBouncer refused or dropped anything.
import { spawn } from 'node:child_process';
import { pgbouncerInstalled, startPgbouncer } from '../helpers/pgbouncer.js';
import { testDatabaseUrl } from '../env.js';

// The sandbox lifecycles: off-ramps, on-ramps, payment intents, refunds, payout batches. Then npm start and each
// Procfile process through a PgBouncer of that file's own (SHOW CLIENTS lists each; the release phase and admin
// commands direct).
const LIFECYCLES = ['offramps', 'onramps', 'payment-intents', 'refunds', 'payout-batches'].map((f) => `test/integration/${f}.test.ts`);
const FILES = [...LIFECYCLES, 'test/pooler/processes.pooler.ts'];

if (!pgbouncerInstalled()) {
  process.stderr.write('test:pooler: pgbouncer is not installed (as root: apt-get install -y pgbouncer)\n');
  process.exit(1);
}
const bouncer = await startPgbouncer(testDatabaseUrl());
const code = await new Promise<number>((resolve) => {
  const mocha = spawn(process.execPath, ['node_modules/mocha/bin/mocha.js', ...FILES], {
    env: { ...process.env, TEST_DATABASE_POOL_URL: bouncer.url },
    stdio: 'inherit',
  });
  mocha.on('exit', (c) => resolve(c ?? 1));
});
await bouncer.stop();
const refused = bouncer.log().split('\n').filter((line) => /unsupported startup parameter|FATAL|ERROR|prepared statement/.test(line));
const logins = bouncer.log().split('\n').filter((line) => /login attempt/.test(line)).length;
process.stdout.write(`test:pooler: ${logins} client logins through PgBouncer (transaction mode, defaults); ${refused.length} refused or failed\n`);
for (const line of refused.slice(0, 20)) process.stdout.write(`  ${line}\n`);
process.exit(code || (refused.length ? 1 : 0));
