// Mocha root hooks: point config at the test database and a Redis prefix per test file, migrate once, clean up after.
import { testDatabaseUrl, testRedisUrl } from './env.js';

process.env.NODE_ENV = 'test';
process.env.DATABASE_URL = testDatabaseUrl();
process.env.REDIS_URL = testRedisUrl();
// npm run test:pooler: service processes the tests start connect through the pooler, as on a platform.
if (process.env.TEST_DATABASE_POOL_URL) process.env.DATABASE_CONNECTION_POOL_URL = process.env.TEST_DATABASE_POOL_URL;
const RUN_PREFIX = `rwtest-${process.pid}-${Date.now().toString(36)}`;
process.env.REDIS_PREFIX = RUN_PREFIX;
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL || 'silent';
process.env.SANDBOX_STEP_MS ??= '5';
process.env.OUTBOX_POLL_MS ??= '50';
// Provider retries are job options set where a job is enqueued (by any process): short and few, for every test.
process.env.PROVIDER_MAX_ATTEMPTS ??= '2';
process.env.PROVIDER_RETRY_BASE_MS ??= '10';
// A killed worker's jobs come back after this; every worker of the run uses it (BullMQ's stalled check is shared per
// queue, so one worker with a long interval would hold back the others).
process.env.WORKER_LOCK_MS ??= '2000';
// A small pool of pre-derived addresses: enough to be used, cheap to fill in every file that starts the pricing pool.
process.env.ADDRESS_POOL_SIZE ??= '40';
// Live data refuses the built-in development secrets; tests configure their own (public, test-only) ones.
process.env.WALLET_SEED_LIVE ||= 'legal winner thank year wave sausage worth useful legal winner thank yellow';
// Its public keys (npm run admin -- wallet-xpub / treasury-address), for the harness's web processes, which read no seed.
process.env.WALLET_XPUB_LIVE ||= 'xpub6EPuWo2Zez8qnWR1a44VViRzRwan7Ct5XaKCz2anC2xSQLCUUvhGEnGYBohKCsocJHEkYQ143QJH8fixW8ixUxrh6bU52qG2tPe1vqCJjiD';
process.env.WALLET_TREASURY_ADDRESS_LIVE ||= '0x44f649fc8Dc77694E6ABEF1aA966983Dd6ED7C64';
// A test-only key first (live details are never sealed under the public development key); dev1 stays listed so rows
// earlier runs sealed under it still open.
process.env.ENCRYPTION_KEYS ||= `test1:${Buffer.alloc(32, 9).toString('base64')},dev1:${Buffer.alloc(32, 7).toString('base64')}`;
// Without these every chain would default to viem's public RPC. Tests never leave the machine: a chain not pointed
// at Anvil gets a port nothing listens on (discard), so a chain read fails fast with connection refused.
const DEAD_RPC_URL = 'http://127.0.0.1:9';
process.env.RPC_URL_BASE ||= DEAD_RPC_URL;
process.env.RPC_URL_POLYGON ||= DEAD_RPC_URL;
process.env.RPC_URL_ARBITRUM ||= DEAD_RPC_URL;
process.env.RPC_URL_OPTIMISM ||= DEAD_RPC_URL;
process.env.RPC_URL_AVALANCHE ||= DEAD_RPC_URL;

const { getDs, closeShared, useRedisPrefix } = await import('./helpers/shared.js');
const RUN_STARTED = new Date();

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await getDs();
    // A Redis prefix per test file: its first hook, ahead of the file's own, so what a file leaves in a queue is never
    // another file's work. (Mocha has no per-file hook; each file's top-level suites carry their file name.)
    const files = new Map<string, number>();
    for (const suite of this.test?.parent?.suites ?? []) {
      const n = files.get(suite.file ?? '') ?? files.size;
      files.set(suite.file ?? '', n);
      suite.beforeAll(`redis prefix of ${suite.file ?? 'this file'}`, () => useRedisPrefix(`${RUN_PREFIX}-f${n}`));
      const hooks = (suite as unknown as { _beforeAll: unknown[] })._beforeAll;
      hooks.unshift(hooks.pop());
    }
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    // Whatever the run did: every entry it posted balances, and every stored balance equals its postings.
    const { findLedgerInconsistencies } = await import('../shared/domain/ledger.js');
    const found = await findLedgerInconsistencies(await getDs(), { entriesSince: RUN_STARTED });
    await closeShared(RUN_PREFIX);
    if (found.unbalancedEntries.length || found.driftedAccounts.length) throw new Error(`ledger unsound after the run: ${JSON.stringify(found).slice(0, 2000)}`);
    // Every error any test met was one its operation's document declares (the per-operation Error.code enums).
    const { undeclaredErrors } = await import('../api/openapi/error-codes.js');
    if (undeclaredErrors.size) throw new Error(`error codes answered but not declared in the OpenAPI document: ${[...undeclaredErrors].sort().join('; ')}`);
  },
};
