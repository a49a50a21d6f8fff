// The examples/ scripts, run as an integrator would run them: through the typed client (clients/typescript), over
// HTTP, against the web process and every worker pool on the sandbox.
import type { AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
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
