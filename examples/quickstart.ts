// Quickstart, sandbox: a customer (with its managed wallet), simulated USDC on it, a KES M-Pesa beneficiary, a quote,
// the off-ramp, and polling until it is final. Every write has its own Idempotency-Key, so this runs again and again.
//   RAMPWAY_KEY=svc_test_... [RAMPWAY_BASE_URL=http://localhost:3000] npx tsx examples/quickstart.ts
import { pathToFileURL } from 'node:url';
import { createRampwayClient, idempotencyKey, unwrap, type Schemas } from '@rampway/client';

export interface QuickstartOptions {
  baseUrl: string;
  apiKey: string;
  /** How long to poll for a final status. */
  timeoutMs?: number;
  log?: (line: string) => void;
}

const FINAL = new Set(['completed', 'failed', 'action_required']);

export async function quickstart(options: QuickstartOptions): Promise<Schemas['Transaction']> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  const write = (prefix: string) => ({ header: { 'Idempotency-Key': idempotencyKey(prefix) } });

  const customer = unwrap(await api.POST('/api/v1/business/customers', {
    params: write('customer'),
    body: { external_reference: `quickstart-${Date.now()}`, display_name: 'Amina Wanjiru' },
  }));
  log(`customer ${customer.id}, managed wallet ${customer.wallet.address}`);

  // Sandbox only: the managed wallet needs USDC to send.
  unwrap(await api.POST('/api/v1/business/sandbox/wallets/{id}/fund', {
    params: { path: { id: customer.wallet.id }, ...write('fund') },
    body: { chain: 'base', amount: '100' },
  }));

  const beneficiary = unwrap(await api.POST('/api/v1/business/beneficiaries', {
    params: write('beneficiary'),
    body: {
      currency: 'KES',
      payment_method: 'mobile_money',
      account_holder_name: 'Amina Wanjiru',
      details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
      customer_id: customer.id,
    },
  }));
  log(`beneficiary ${beneficiary.id}`);

  let quote = unwrap(await api.POST('/api/v1/business/quotes', {
    params: write('quote'),
    body: { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '50', beneficiary_id: beneficiary.id },
  }));
  // 202 pending: the price is on its way.
  while (quote.status === 'pending') {
    await sleep(250);
    quote = unwrap(await api.GET('/api/v1/business/quotes/{id}', { params: { path: { id: quote.id } } }));
  }
  log(`quote ${quote.id}: ${quote.source.total_required} USDC for ${quote.destination.amount} KES`);

  let transaction = unwrap(await api.POST('/api/v1/business/offramps', {
    params: write('offramp'),
    body: { quote_id: quote.id, funding_source: { wallet_id: customer.wallet.id } },
  }));
  log(`off-ramp ${transaction.id}: ${transaction.status}`);

  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  while (!FINAL.has(transaction.status)) {
    if (Date.now() > deadline) throw new Error(`off-ramp ${transaction.id} still ${transaction.status}`);
    await sleep(500);
    transaction = unwrap(await api.GET('/api/v1/business/transactions/{id}', { params: { path: { id: transaction.id } } }));
  }
  log(`off-ramp ${transaction.id}: ${transaction.status}`);
  return transaction;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a sandbox key (npm run -s admin -- create-business --name Acme --json).');
    process.exit(2);
  }
  await quickstart({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey });
}
