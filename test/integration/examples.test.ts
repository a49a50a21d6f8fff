// The examples/ scripts, run as an integrator would run them: through the typed client (clients/typescript), over
// HTTP, against the web process and every worker pool on the sandbox.
import type { AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { expect } from 'chai';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { startService, type RunningService } from '../helpers/service.js';
import { getConfig } from '../../shared/config.js';
import { createRampwayClient, idempotencyKey, unwrap } from '@rampway/client';
import { quickstart } from '../../examples/quickstart.js';
import { proveOwnership } from '../../examples/wallet-ownership.js';
import { startReceiver, type RampwayEvent } from '../../examples/webhook-receiver.js';
import { payoutBatch } from '../../examples/payout-batch.js';
import { liquidationAddress } from '../../examples/liquidation-address.js';
import { csvExport } from '../../examples/csv-export.js';
import { webhookTestEvent } from '../../examples/webhook-test-event.js';

describe('examples/ through the typed client, against the running sandbox', function () {
  this.timeout(90_000);
  let service: RunningService;
  let baseUrl: string;
  let apiKey: string;
  const quiet = () => {};

  before(async () => {
    const env = { WEBHOOKS_ALLOW_LOOPBACK: 'true', REDIS_PREFIX: `${getConfig().redisPrefix}-examples` };
    service = await startService({ env });
    baseUrl = service.baseUrl;
    apiKey = (await makeKey((await makeBusiness()).businessId, { environment: 'sandbox' })).key;
  });

  after(async () => {
    await service?.close();
  });

  it('quickstart: customer, funding, beneficiary, quote and off-ramp, polled to completed, and again (fresh keys each run)', async () => {
    const first = await quickstart({ baseUrl, apiKey, log: quiet });
    expect(first.status).to.equal('completed');
    expect(first.direction).to.equal('offramp');
    expect(first.source.amount).to.equal('50.000000');
    const second = await quickstart({ baseUrl, apiKey, log: quiet });
    expect(second.status).to.equal('completed');
    expect(second.id).to.not.equal(first.id);
  });

  it('the README\'s curl walkthrough runs as written, twice in a row, each run a new off-ramp that completes', async () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const block = /## Try it with curl[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)![1];
    // The key comes from the test's business (create-business prints one the same way), and the service listens here.
    const script = block.split('\n').filter((line) => !/^(npm run -s admin|export KEY=)/.test(line)).join('\n').replaceAll('localhost:3000', baseUrl);
    // Asynchronously: the service answering it runs in this process.
    const run = async () => (await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { env: { ...process.env, KEY: apiKey }, encoding: 'utf8', timeout: 60_000 })).stdout;
    const first = (await run()).trim().split('\n');
    await new Promise((resolve) => setTimeout(resolve, 1100)); // RUN is in seconds
    const second = (await run()).trim().split('\n');
    expect(first.at(-1)).to.equal('completed');
    expect(second.at(-1)).to.equal('completed');
  });

  it('payout batch: the treasury funded by a sandbox M-Pesa payment pays three beneficiaries in one batch, completed', async () => {
    const batch = await payoutBatch({ baseUrl, apiKey, log: quiet });
    expect(batch).to.include({ status: 'completed', items_count: 3, completed_count: 3, failed_count: 0 });
    expect(batch.items?.map((i) => i.status)).to.deep.equal(['completed', 'completed', 'completed']);
  });

  it('liquidation address: a sandbox transfer of 100 USDC becomes an off-ramp that completes, then the address is archived', async () => {
    const { address, transaction } = await liquidationAddress({ baseUrl, apiKey, log: quiet });
    expect(address.status).to.equal('archived');
    expect(transaction).to.include({ status: 'completed', direction: 'offramp', liquidation_address_id: address.id });
    expect(transaction.funding_source).to.deep.include({ type: 'liquidation_address', reference: address.id, address: address.address });
    expect(transaction.source.total_required).to.equal('100.000000');
    expect(transaction.provider_reference).to.match(/^S[0-9A-Z]{9}$/);
  });

  it('CSV export: every completed transaction saved as RFC 4180 CSV with the contract\'s header, and the ledger\'s entries each balanced', async () => {
    const tx = await quickstart({ baseUrl, apiKey, log: quiet });
    const dir = mkdtempSync(join(tmpdir(), 'rampway-csv-'));
    try {
      const out = join(dir, 'transactions.csv');
      const result = await csvExport({ baseUrl, apiKey, out, log: quiet });
      expect(result.transactions.header).to.deep.equal([
        'id', 'direction', 'status', 'created_at', 'completed_at', 'source_amount', 'source_currency_or_asset', 'destination_amount', 'destination_currency_or_asset',
        'fee_provider', 'fee_platform', 'exchange_rate', 'beneficiary_id', 'wallet_id', 'external_reference', 'provider_reference', 'settlement_transaction_hash',
        'destination_transaction_hash',
      ]);
      expect(result.transactions.rows).to.be.at.least(1);
      expect(Number(result.transactions.paidOut.KES)).to.be.at.least(Number(tx.destination.amount));
      const saved = readFileSync(out, 'utf8');
      expect(saved.startsWith('id,direction,status,')).to.equal(true);
      expect(saved).to.include(`${tx.id},offramp,completed,`);
      expect(saved.trimEnd().split('\r\n')).to.have.length(result.transactions.rows + 1);
      expect(result.ledger.rows).to.be.at.least(2);
      expect(result.ledger.entries).to.be.at.least(1);
      expect(result.ledger.unbalanced).to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('webhook test event: the endpoint alone gets a signed webhook.test, verified by the receiver, and the attempt shows in its deliveries', async () => {
    const { endpoint, event, deliveries } = await webhookTestEvent({ baseUrl, apiKey, port: 0, log: quiet });
    expect(event.type).to.equal('webhook.test');
    expect(event.data).to.deep.include({ webhook_endpoint_id: endpoint.id });
    const attempt = deliveries.find((d) => d.event_id === event.id);
    expect(attempt).to.include({ event_type: 'webhook.test', attempt: 1, status_code: 204 });
  });

  it('wallet ownership: a viem key signs the challenge and the wallet reads verified', async () => {
    const wallet = await proveOwnership({ baseUrl, apiKey, log: quiet });
    expect(wallet.ownership_status).to.equal('verified');
    expect(wallet.verified_at).to.be.a('string');
  });

  it('webhook receiver: verifies the signed deliveries of a quickstart and refuses a forged one', async () => {
    const events: RampwayEvent[] = [];
    // A free port first (the endpoint's URL names it), then the receiver with the secret the service issues.
    let receiver: Server | undefined;
    const client = createRampwayClient({ baseUrl, apiKey });
    const probe = await startReceiver({ secret: `whsec_${Buffer.alloc(24, 7).toString('base64')}`, port: 0, onEvent: () => {} });
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const endpoint = unwrap(await client.POST('/api/v1/business/webhook-endpoints', {
      params: { header: { 'Idempotency-Key': idempotencyKey('endpoint') } },
      body: { url: `http://127.0.0.1:${port}/rampway`, events: ['transaction.*'] },
    }));
    try {
      receiver = await startReceiver({ secret: endpoint.secret!, port, onEvent: (e) => events.push(e) });
      const tx = await quickstart({ baseUrl, apiKey, log: quiet });
      const deadline = Date.now() + 20_000;
      while (!events.some((e) => e.type === 'transaction.completed' && e.data.id === tx.id) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const mine = events.filter((e) => e.data.id === tx.id).map((e) => e.type);
      expect(mine).to.include.members(['transaction.created', 'transaction.completed']);
      // A body signed with another secret is refused.
      const forged = await fetch(`http://127.0.0.1:${port}/rampway`, {
        method: 'POST',
        headers: { 'webhook-id': 'evt_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' },
        body: JSON.stringify({ id: 'evt_forged', type: 'transaction.completed', data: {} }),
      });
      expect(forged.status).to.equal(400);
      expect(events.some((e) => e.id === 'evt_forged')).to.equal(false);
    } finally {
      await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
    }
  });
});
