// What the benchmark reads: a business with a key, customers and completed off-ramps, made through the API itself.
import { randomUUID } from 'node:crypto';

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
