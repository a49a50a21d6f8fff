// Part of `npm test`: makes sure the test database exists and Redis answers, before mocha starts.
import { ensureDatabase, ensureRedis, PreflightError } from './preflight.js';
import { testDatabaseUrl, testRedisUrl } from '../test/env.js';

try {
  await ensureDatabase(testDatabaseUrl());
  await ensureRedis(testRedisUrl());
} catch (err) {
  process.stderr.write(`tests cannot run: ${err instanceof PreflightError ? err.message : String(err)}\n`);
  process.exit(1);
}
