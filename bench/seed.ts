// What the benchmark reads: a business with a key, customers and completed off-ramps, made through the API itself.
import { randomUUID } from 'node:crypto';
import type autocannon from 'autocannon';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';

export interface Seed {
  key: string;
  customerId: string;
  beneficiaryId: string;
  transactionId: string;
}

/** A page of 25 of each, so list pages are full. */
const PAGE = 25;

/** A seeding call through the API (each write its own Idempotency-Key); throws unless 2xx. */
export function apiCaller(api: string, key: string) {
  return async (method: string, path: string, body?: object): Promise<Record<string, any>> => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...(method === 'GET' ? {} : { 'Idempotency-Key': `seed-${randomUUID()}` }) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json()) as Record<string, any>;
    if (res.status >= 300) throw new Error(`seeding: ${method} ${path} answered ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** A benchmark's environment: its own database and Redis prefix, no rate limit in the way, the sandbox without delays. */
export function benchEnv(prefix: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    ...(process.env as Record<string, string>),
    DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
    REDIS_PREFIX: `${prefix}-${Date.now().toString(36)}`,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    RATE_LIMIT_DEFAULT: '100000000',
    SANDBOX_STEP_MS: '0',
    ...overrides,
  };
}

/** The benchmark's database made and migrated, Redis reachable, and `env` made this process's own. */
export async function prepareBench(env: Record<string, string>): Promise<void> {
  await ensureDatabase(env.DATABASE_URL);
  await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  Object.assign(process.env, env);
  const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
  const ds = createDataSource({ poolSize: 2 });
  await ds.initialize();
  await runMigrations(ds);
  await ds.destroy();
}

export async function seedBench(api: string): Promise<Seed> {
  const { createDataSource } = await import('../shared/db/data-source.js');
  const { createBusiness } = await import('../shared/admin/commands.js');
  const { getConfig } = await import('../shared/config.js');
  const ds = createDataSource({ poolSize: 2 });
  await ds.initialize();
  const biz = await createBusiness({ ds, config: getConfig() }, { name: 'Bench Co' });
  await ds.destroy();
  const key = biz.keys.find((k) => k.environment === 'sandbox')!.key;
  const call = apiCaller(api, key);

  const customers = [];
  for (let i = 0; i < PAGE; i++) customers.push(await call('POST', '/customers', { external_reference: `seed-${randomUUID()}` }));
  const walletId = customers[0].wallet.id;
  await call('POST', `/sandbox/wallets/${walletId}/fund`, { chain: 'base', amount: '10000' });
  const beneficiary = await call('POST', '/beneficiaries', {
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench Payee', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
  });
  const transactions: string[] = [];
  for (let i = 0; i < PAGE; i++) {
    let quote = await call('POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '25', beneficiary_id: beneficiary.id });
    // 202 pending while the pricing pool is busy (a loaded machine): the price is on its way.
    for (let tries = 0; quote.status === 'pending'; tries++) {
      if (tries > 300) throw new Error(`seeding: quote ${quote.id} stayed pending`);
      await new Promise((r) => setTimeout(r, 100));
      quote = await call('GET', `/quotes/${quote.id}`);
    }
    transactions.push((await call('POST', '/offramps', { quote_id: quote.id, funding_source: { wallet_id: walletId } })).id);
  }
  for (const id of transactions) {
    for (let tries = 0; (await call('GET', `/transactions/${id}`)).status !== 'completed'; tries++) {
      if (tries > 300) throw new Error(`seeding: off-ramp ${id} did not complete`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { key, customerId: customers[0].id, beneficiaryId: beneficiary.id, transactionId: transactions[0] };
}

let writes = 0;
/** Every request its own Idempotency-Key (and body), as a client creating many resources sends them. */
export function uniqueWrites(key: string, path: string, body: (id: string) => object): Partial<autocannon.Options> {
  return {
    requests: [{
      setupRequest: (req: autocannon.Request) => {
        const id = `${process.pid}-${Date.now().toString(36)}-${(writes += 1)}`;
        return {
          ...req,
          method: 'POST',
          path,
          headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': `bench-${id}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(body(id)),
        };
      },
    }] as unknown as autocannon.Request[],
  };
}
