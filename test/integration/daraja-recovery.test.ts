import { expect } from 'chai';
import { getDs } from '../helpers/shared.js';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, history, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { CALLBACK_TOKEN, liveOnramp, livePayout, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { providerJobs } from '../../shared/domain/provider-results.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';

// What arrives late, twice, out of order, or never: nothing moves a transaction twice or backwards, and nothing waits
// for ever.

/** A moment for whatever is in flight to land, before asserting that nothing moved. */
async function settled(ms = 600): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

describe('live M-Pesa results late, out of order, or never', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    // Checks a second apart: long enough for the sweeper test to lose one before it runs.
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '1000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const postCallback = (kind: string, body: unknown) =>
    fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/${kind}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  it('a failure result after the payout completed (late, out of order) changes nothing: no second move, no refund', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712341012', mobile_network: 'safaricom' });
    await untilStatus(rail.api, rail.key, id, ['completed']);
    const result = rail.fake.resultFor(id)!;
    result.Result.ResultCode = 2040;
    result.Result.ResultDesc = 'late refusal';
    expect((await postCallback('result', result)).status).to.equal(200);
    // The Transaction Status result for it, saying Failed, comes too.
    expect((await postCallback('status', {
      Result: { ResultType: 0, ResultCode: 0, ResultDesc: 'ok', OriginatorConversationID: 'q-1', ConversationID: result.Result.ConversationID, TransactionID: '',
        ResultParameters: { ResultParameter: [{ Key: 'TransactionStatus', Value: 'Failed' }] }, ReferenceData: { ReferenceItem: { Key: 'Occasion', Value: id } } },
    })).status).to.equal(200);
    await settled();
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed']);
    expect(tx.status).to.equal('completed');
    expect(tx.refund).to.equal(null);
    expect(await history(id)).to.deep.equal(['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('a declined STK result after the on-ramp was paid changes nothing', async () => {
    const id = await liveOnramp(rail, '+254712341013');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed']);
    const checkout = tx.payment_source.reference;
    expect((await postCallback('stk', { Body: { stkCallback: { MerchantRequestID: 'late', CheckoutRequestID: checkout, ResultCode: 1032, ResultDesc: 'Request cancelled by user' } } })).status).to.equal(200);
    await settled();
    expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed'])).status).to.equal('completed');
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('a payout M-Pesa never answers for (no result, no status) goes action_required after the status checks', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712340088', mobile_network: 'safaricom' });
    // Five checks a second apart: longer than untilStatus waits.
    const tx = await until(async () => {
      const t = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
      return ['completed', 'failed', 'action_required'].includes(t.status) && t;
    }, { timeoutMs: 20_000, what: 'the payout giving up on M-Pesa' });
    expect(tx.status).to.equal('action_required');
    expect(tx.failure).to.deep.equal({ code: 'provider_unavailable', message: 'M-Pesa gave no result after 5 status checks.' });
    const statusQueries = () => rail.fake.log.filter((r) => r.path === '/mpesa/transactionstatus/v1/query' && r.body.OriginalConversationID === id).length;
    expect(statusQueries()).to.equal(5);
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
    // Retry: M-Pesa took the request and never says it has no record of it, so it is not sent again; the retry asks
    // first, then the checks start over.
    expect((await rail.api.http.post(`${BASE}/transactions/${id}/retry`).set(writeHeaders(rail.key))).status).to.equal(202);
    await until(() => statusQueries() === 11, { timeoutMs: 20_000, what: 'the retry\'s query and five more status checks' });
    expect((await untilStatus(rail.api, rail.key, id, ['action_required', 'failed', 'completed'])).status).to.equal('action_required');
    expect(statusQueries()).to.equal(11);
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
  });
});

// Redis losing a job, caught before it runs: the status check a prompt schedules waits 10 s here, and M-Pesa's
// callback comes 5 s after the prompt, so a loaded machine still pauses the pool or removes the job first (with the
// check a second out, one that ran first paid the on-ramp and the test's awaiting_funds failed).
describe('live M-Pesa results whose jobs Redis lost', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '10000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('a stored callback whose job Redis lost is applied by the sweeper (fault seed 4010: a paid prompt never credited)', async () => {
    rail.fake.callbackDelayMs = 5000;
    try {
      const id = await liveOnramp(rail, '+254712341014');
      await untilStatus(rail.api, rail.key, id, ['awaiting_funds', 'completed']);
      // The providers pool takes nothing while its jobs are lost: the callback's apply job, and the status check that
      // would otherwise find the payment on its own.
      const queue = rail.pools.deps.queues.providers;
      await queue.pause();
      const ds = await getDs();
      const stored = await until(async () => (await ds.query(
        `SELECT id FROM provider_callbacks WHERE kind = 'stk' AND body->'Body'->'stkCallback'->>'CheckoutRequestID' = (SELECT provider_reference FROM provider_requests WHERE kind = 'collection' AND reference = $1::text)`, [id]))[0], { what: 'the callback stored' });
      await queue.remove(providerJobs.callback(stored.id).id);
      await queue.remove(providerJobs.check({ transactionId: id, round: 1, after: 'r0' }, 0).id);
      await queue.resume();
      await settled();
      expect((await untilStatus(rail.api, rail.key, id, ['awaiting_funds', 'completed'])).status).to.equal('awaiting_funds');
      await ds.query(`UPDATE provider_callbacks SET received_at = now() - interval '5 minutes' WHERE id = $1`, [stored.id]);
      const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
      expect(counts['provider callbacks stored and never applied']).to.be.at.least(1);
      expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed'])).status).to.equal('completed');
      const [applied] = await ds.query(`SELECT processed_at, result FROM provider_callbacks WHERE id = $1`, [stored.id]);
      expect(applied.processed_at).to.not.equal(null);
    } finally {
      rail.fake.callbackDelayMs = 30;
      await rail.pools.deps.queues.providers.resume();
    }
  });

  it('a status check Redis lost is found by the sweeper, and the lost callback recovered', async () => {
    const id = await liveOnramp(rail, '+254712340099');
    await untilStatus(rail.api, rail.key, id, ['awaiting_funds', 'completed']);
    // The delayed check job is lost before it runs, and the transaction has waited past the sweeper's limit.
    await rail.pools.deps.queues.providers.remove(providerJobs.check({ transactionId: id, round: 1, after: 'r0' }, 0).id);
    await (await getDs()).query(`UPDATE transactions SET updated_at = now() - interval '11 minutes' WHERE id = $1`, [id]);
    await settled();
    expect((await untilStatus(rail.api, rail.key, id, ['awaiting_funds', 'completed'])).status).to.equal('awaiting_funds');
    const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    expect(counts['transactions live onramp awaiting_funds']).to.be.at.least(1);
    expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed'])).status).to.equal('completed');
  });
});
