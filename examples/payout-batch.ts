// Payout batch, sandbox: money into the treasury (a payment intent the sandbox payer pays by M-Pesa), then one request
// that pays three beneficiaries from it (two in KES, one a USDC amount), polled until the batch is completed.
//   RAMPWAY_KEY=svc_test_... [RAMPWAY_BASE_URL=http://localhost:3000] npx tsx examples/payout-batch.ts
import { pathToFileURL } from 'node:url';
import { createRampwayClient, idempotencyKey, unwrap, type Schemas } from '@rampway/client';

export interface PayoutBatchOptions {
  baseUrl: string;
  apiKey: string;
  /** How long to wait for the treasury and then the batch. */
  timeoutMs?: number;
  log?: (line: string) => void;
}

export async function payoutBatch(options: PayoutBatchOptions): Promise<Schemas['PayoutBatch']> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  const write = (prefix: string) => ({ header: { 'Idempotency-Key': idempotencyKey(prefix) } });
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const wait = async (what: string) => {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  };

  // Sandbox only: a customer pays KES 20,000 by M-Pesa into the treasury.
  const before = unwrap(await api.GET('/api/v1/business/treasury/balance', {})).available;
  const intent = unwrap(await api.POST('/api/v1/business/payment-intents', {
    params: write('intent'),
    body: { amount: { currency: 'KES', value: '20000' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' }, expires_in_seconds: 3600 },
  }));
  unwrap(await api.POST('/api/v1/business/sandbox/payment-intents/{id}/pay', { params: { path: { id: intent.id }, ...write('pay') }, body: { method: 'mobile_money' } }));
  let balance = unwrap(await api.GET('/api/v1/business/treasury/balance', {}));
  while (balance.available === before) {
    await wait('the treasury deposit');
    balance = unwrap(await api.GET('/api/v1/business/treasury/balance', {}));
  }
  log(`treasury: ${balance.available} USDC available`);

  const people = [['Amina Wanjiru', '+254722480163'], ['Baraka Otieno', '+254722480164'], ['Chebet Kiprop', '+254722480165']];
  const beneficiaries = [];
  for (const [name, phone] of people) {
    beneficiaries.push(unwrap(await api.POST('/api/v1/business/beneficiaries', {
      params: write('beneficiary'),
      body: { currency: 'KES', payment_method: 'mobile_money', account_holder_name: name, details: { phone_number: phone, mobile_network: 'safaricom' } },
    })));
  }

  // Checked and priced whole: one bad item answers 422 invalid_batch (each bad item by its index) and nothing moves.
  let batch = unwrap(await api.POST('/api/v1/business/payout-batches', {
    params: write('batch'),
    body: {
      external_reference: `payroll-${Date.now()}`,
      items: [
        { beneficiary_id: beneficiaries[0].id, amount: { currency: 'KES', value: '5000' } },
        { beneficiary_id: beneficiaries[1].id, amount: { currency: 'KES', value: '3500.50' } },
        { beneficiary_id: beneficiaries[2].id, amount: { asset: 'USDC', value: '20' } },
      ],
    },
  }));
  log(`batch ${batch.id}: ${batch.status}, ${batch.items_count} payouts, ${batch.total_usdc} USDC from the treasury`);

  while (batch.status !== 'completed') {
    await wait(`batch ${batch.id}`);
    batch = unwrap(await api.GET('/api/v1/business/payout-batches/{id}', { params: { path: { id: batch.id } } }));
  }
  log(`batch ${batch.id}: completed, ${batch.completed_count} paid, ${batch.failed_count} failed`);
  return batch;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a sandbox key (npm run -s admin -- create-business --name Acme --json).');
    process.exit(2);
  }
  await payoutBatch({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey });
}
