// Mocha root hooks: point config at the test database and a per-run Redis prefix, migrate once, clean up after.
import { testDatabaseUrl, testRedisUrl } from './env.js';

process.env.NODE_ENV = 'test';
process.env.DATABASE_URL = testDatabaseUrl();
process.env.REDIS_URL = testRedisUrl();
process.env.REDIS_PREFIX = `rwtest-${process.pid}-${Date.now().toString(36)}`;
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL || 'silent';
process.env.SANDBOX_STEP_MS ??= '5';
process.env.OUTBOX_POLL_MS ??= '50';

const { getDs, closeShared } = await import('./helpers/shared.js');

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await getDs();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await closeShared();
  },
};
