// Liquidation address, sandbox: a permanent USDC deposit address tied to a beneficiary. Every transfer to it becomes an
// off-ramp that pays the beneficiary by M-Pesa, with no API call per payment. The sandbox plays the transfer; the
// off-ramp it becomes is polled until final, then the address is archived (later transfers go back to their sender).
//   RAMPWAY_KEY=svc_test_... [RAMPWAY_BASE_URL=http://localhost:3000] npx tsx examples/liquidation-address.ts
import { pathToFileURL } from 'node:url';
import { createRampwayClient, idempotencyKey, unwrap, type Schemas } from '@rampway/client';

export interface LiquidationAddressOptions {
  baseUrl: string;
  apiKey: string;
  /** How long to wait for the transfer's off-ramp to be final. */
  timeoutMs?: number;
  log?: (line: string) => void;
}

const FINAL = new Set(['completed', 'failed', 'action_required']);

export async function liquidationAddress(options: LiquidationAddressOptions): Promise<{ address: Schemas['LiquidationAddress']; transaction: Schemas['Transaction'] }> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  const write = (prefix: string) => ({ header: { 'Idempotency-Key': idempotencyKey(prefix) } });
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);

  const beneficiary = unwrap(await api.POST('/api/v1/business/beneficiaries', {
    params: write('beneficiary'),
    body: { currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Amina Wanjiru', details: { phone_number: '+254722480163', mobile_network: 'safaricom' } },
  }));
  const address = unwrap(await api.POST('/api/v1/business/liquidation-addresses', {
    params: write('liquidation-address'),
    body: { chain: 'base', beneficiary_id: beneficiary.id, external_reference: `payroll-amina-${Date.now()}` },
  }));
  log(`liquidation address ${address.id}: send USDC on ${address.chain} to ${address.address}`);

  // Sandbox only: 100 USDC arrives from a fixed sandbox sender. Live, any wallet sends USDC to address.address.
  unwrap(await api.POST('/api/v1/business/sandbox/liquidation-addresses/{id}/transfer', { params: { path: { id: address.id }, ...write('transfer') }, body: { amount: '100' } }));

  // Each transfer is one off-ramp to the beneficiary, priced when it arrived: here the beneficiary's only transaction.
  let transaction: Schemas['Transaction'] | undefined;
  while (!transaction || !FINAL.has(transaction.status)) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for the off-ramp of ${address.id} (${transaction?.status ?? 'not seen yet'})`);
    await new Promise((resolve) => setTimeout(resolve, 250));
    // A JSON page (this operation answers CSV only when asked with Accept: text/csv, see examples/csv-export.ts).
    const page = unwrap(await api.GET('/api/v1/business/transactions', { params: { query: { beneficiary_id: beneficiary.id, direction: 'offramp' } } })) as Schemas['TransactionList'];
    transaction = page.data.find((t) => t.liquidation_address_id === address.id);
  }
  log(`off-ramp ${transaction.id}: ${transaction.status}, ${transaction.source.total_required} USDC received -> ${transaction.destination.amount} KES` +
    ` (M-Pesa receipt ${transaction.provider_reference ?? 'none'})`);

  const archived = unwrap(await api.POST('/api/v1/business/liquidation-addresses/{id}/archive', { params: { path: { id: address.id }, ...write('archive') } }));
  log(`liquidation address ${archived.id}: ${archived.status}`);
  return { address: archived, transaction };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a sandbox key (npm run -s admin -- create-business --name Acme --json).');
    process.exit(2);
  }
  await liquidationAddress({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey });
}
