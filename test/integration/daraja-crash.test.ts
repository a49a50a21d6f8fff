import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeHeaders } from '../helpers/factories.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, quote, untilStatus } from '../helpers/ramps.js';
import { fundedLiveWallet, liveBeneficiary, startLiveRail, type LiveRail } from '../helpers/live-rail.js';

/** The providers pool as its own process (node with tsx as its loader, so SIGKILL reaches it), on the live rail's settings. */
function providersProcess(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', 'providers'], { env: { ...process.env, ...env, LOG_LEVEL: 'silent' }, stdio: 'ignore' });
}

describe('the providers worker killed between a payout request and its result', function () {
  this.timeout(90_000);
  let rail: LiveRail;
  let worker: ChildProcess | undefined;
  before(async () => {
    rail = await startLiveRail({ pools: ['pricing', 'settlement'] });
  });
  after(async () => {
    worker?.kill('SIGKILL');
    await rail?.close();
  });

  it('SIGKILL while M-Pesa holds the B2C requests, restart: every payout completes, and M-Pesa got exactly one request each', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const walletId = await fundedLiveWallet(rail, '50');
      // Receivers ending in 0077: the fake holds the request before answering.
      const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: `+2547123${i}0077`, mobile_network: 'safaricom' });
      const q = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
      const res = await rail.api.http.post(`${BASE}/offramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, funding_source: { wallet_id: walletId } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      ids.push(res.body.id);
    }
    rail.fake.holdMs = 1_500;
    worker = providersProcess(rail.env);
    // Every payout request reached M-Pesa, and none has its answer yet.
    for (let i = 0; i < 800 && !ids.every((id) => rail.fake.payoutsTo(id).length === 1); i++) await new Promise((r) => setTimeout(r, 10));
    expect(ids.map((id) => rail.fake.payoutsTo(id).length)).to.deep.equal([1, 1, 1, 1]);
    worker.kill('SIGKILL');
    await new Promise((r) => worker!.once('exit', r));
    for (const id of ids) expect((await untilStatus(rail.api, rail.key, id, ['funded', 'processing', 'completed'])).status).to.equal('funded');

    rail.fake.holdMs = 0;
    worker = providersProcess(rail.env);
    for (const id of ids) {
      const deadline = Date.now() + 30_000;
      let tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required', 'processing', 'funded']);
      while (tx.status !== 'completed' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required', 'processing', 'funded']);
      }
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    }
    expect(ids.map((id) => rail.fake.payoutsTo(id).length), 'payout requests per transaction').to.deep.equal([1, 1, 1, 1]);
    // The restarted worker asked before it would have sent again.
    for (const id of ids) expect(rail.fake.log.some((r) => r.path === '/mpesa/transactionstatus/v1/query' && r.body.OriginalConversationID === id)).to.equal(true);
    await expectLedgerSound();
  });
});
