// CONTRACT §18 "Payouts that were not paid" and "On-ramp refunds" on our Daraja stand-in (test/helpers/fake-daraja.ts,
// Safaricom's published B2C and Transaction Status codes): a Result callback alone never sends a payout again; a payout
// M-Pesa answered "not paid" is refundable at once; an on-ramp's fiat refund is sent again until paid.
import { expect } from 'chai';
import { getAddress } from 'viem';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { expectLedgerSound, quote, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { contracts } from '../helpers/chain.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { checkProviderJob } from '../../workers/providers/check-provider.job.js';
import { CALLBACK_TOKEN, liveExternalOfframp, livePayout, startLiveChainRail, startLiveRail, transferUsdcFrom, type LiveChainRail, type LiveRail } from '../helpers/live-rail.js';

const B2C = '/mpesa/b2c/v3/paymentrequest';
const STATUS = '/mpesa/transactionstatus/v1/query';

async function postResult(rail: LiveRail, body: unknown): Promise<string> {
  const res = await fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/result`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).to.equal(200);
  const ds = await getDs();
  const conversation = (body as { Result: { ConversationID: string } }).Result.ConversationID;
  return until(async () => {
    const rows: { result: string | null }[] = await ds.query(
      `SELECT result FROM provider_callbacks WHERE kind = 'result' AND body->'Result'->>'ConversationID' = $1 AND body->'Result'->>'ResultCode' = $2 AND processed_at IS NOT NULL ORDER BY received_at DESC`,
      [conversation, String((body as { Result: { ResultCode: number } }).Result.ResultCode)]);
    return rows[0]?.result ?? false;
  }, { what: 'the forged result applied' });
}

describe('live M-Pesa: a Result callback alone never sends a payout again', function () {
  this.timeout(90_000);
  let rail: LiveRail;
  const settled = (id: string) => until(async () => {
    const tx = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
    return ['completed', 'failed', 'action_required'].includes(tx.status) && tx;
  }, { what: `${id} settled`, timeoutMs: 40_000 });
  before(async () => {
    // Status checks 3 s apart: the test acts between them.
    rail = await startLiveRail({ env: { PROVIDER_RETRY_BASE_MS: '100', DARAJA_STATUS_QUERY_AFTER_MS: '3000', QUOTE_WAIT_MS: '30000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('a forged temporary-code Result (valid token) sends nothing until Transaction Status says not paid; a Result naming an older ConversationID changes nothing', async () => {
    // 0088: M-Pesa accepts the B2C and stays silent (no Result, Transaction Status never answers).
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712380088', mobile_network: 'safaricom' });
    await untilStatus(rail.api, rail.key, id, ['processing']);
    await until(async () => (await (await getDs()).query(`SELECT 1 FROM provider_requests WHERE kind = 'payout' AND reference = $1 AND status = 'pending'`, [id])).length > 0, { what: 'the B2C answer stored' });
    const [first] = rail.fake.conversationsOf(id);
    const forged = rail.fake.resultFor(id)!;
    forged.Result.ResultCode = 1;
    forged.Result.ResultDesc = 'The balance is insufficient for the transaction.';
    delete forged.Result.ResultParameters;
    expect(await postResult(rail, forged)).to.equal('corroborating');
    // Transaction Status is asked about the request; no second B2C while it has no answer.
    await until(() => rail.fake.log.some((r) => r.path === STATUS && r.body.OriginalConversationID === id), { what: 'Transaction Status asked' });
    await new Promise((r) => setTimeout(r, 1000));
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
    expect((await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.status).to.equal('processing');
    // M-Pesa ends it unpaid (our float short): the next status answer lets it go again, and it pays.
    rail.fake.endPayout(id, '1', 'The balance is insufficient for the transaction.');
    await until(() => rail.fake.payoutsTo(id).length === 2, { what: 'the second B2C after Transaction Status said Failed', timeoutMs: 20_000 });
    const second = rail.fake.conversationsOf(id)[1];
    expect(second).to.not.equal(first);
    // A Result for the first request, now older than the latest, changes nothing (neither a failure nor a success).
    const stale = { Result: { ...forged.Result, ConversationID: first, ResultCode: 2040, ResultDesc: 'Credit Party customer type can\'t be supported by the service.' } };
    expect(await postResult(rail, stale)).to.equal('unchanged (a result about an earlier request)');
    // The second request pays (M-Pesa's record says Completed); nothing else was sent.
    await new Promise((r) => setTimeout(r, 1000));
    expect(rail.fake.payoutsTo(id)).to.have.length(2);
    expect(rail.fake.executions.get(id)).to.equal(1);
    expect((await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.refund).to.equal(null);
  });

  it('a forged success Result (valid token) completes nothing: Transaction Status decides, and a payout M-Pesa did not pay is sent again', async () => {
    // The kernel simulator's payout seed 3: a success Result alone completed a payout M-Pesa never paid.
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712380088', mobile_network: 'safaricom' });
    await untilStatus(rail.api, rail.key, id, ['processing']);
    await until(async () => (await (await getDs()).query(`SELECT 1 FROM provider_requests WHERE kind = 'payout' AND reference = $1 AND status = 'pending'`, [id])).length > 0, { what: 'the B2C answer stored' });
    const forged = rail.fake.resultFor(id)!;
    Object.assign(forged.Result, { ResultCode: 0, ResultDesc: 'The service request is processed successfully.', TransactionID: 'TKF0RG3D00' });
    forged.Result.ResultParameters = { ResultParameter: [{ Key: 'TransactionAmount', Value: 1000 }, { Key: 'TransactionReceipt', Value: 'TKF0RG3D00' }] };
    expect(await postResult(rail, forged)).to.equal('corroborating');
    await until(() => rail.fake.log.some((r) => r.path === STATUS && r.body.OriginalConversationID === id), { what: 'Transaction Status asked' });
    await new Promise((r) => setTimeout(r, 1000));
    expect((await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.status).to.equal('processing');
    // M-Pesa's record: not paid (our float short). The claim is denied and the payout goes again, and pays.
    rail.fake.endPayout(id, '1', 'The balance is insufficient for the transaction.');
    await until(() => rail.fake.payoutsTo(id).length === 2, { what: 'the second B2C after Transaction Status said Failed', timeoutMs: 20_000 });
    const tx = await settled(id);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(tx.provider_reference).to.not.equal('TKF0RG3D00');
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  it('a Transaction Status answer to a query asked before the payout went again is not taken for the new request\'s answer', async () => {
    // Seen in CI: two status checks asked while M-Pesa's record said Failed; the first answer sent the payout again,
    // the second, arriving after, was counted against the new request and stalled a payout M-Pesa then paid.
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712380088', mobile_network: 'safaricom' });
    await untilStatus(rail.api, rail.key, id, ['processing']);
    await until(async () => (await (await getDs()).query(`SELECT 1 FROM provider_requests WHERE kind = 'payout' AND reference = $1 AND status = 'pending'`, [id])).length > 0, { what: 'the B2C answer stored' });
    rail.fake.endPayout(id, '1', 'The balance is insufficient for the transaction.');
    // One query is held at M-Pesa until the payout has gone again on the other's answer, then answers Failed (its
    // record when asked): this test's own check and the pool's scheduled one, whichever asks first.
    rail.fake.beforeStatusAnswer = () => until(() => rail.fake.payoutsTo(id).length === 2, { what: 'the payout sent again', timeoutMs: 20_000 }).then(() => undefined);
    await checkProviderJob.process({ data: { transactionId: id, round: 1, after: 'held' } } as never, rail.pools.deps);
    await until(() => rail.fake.payoutsTo(id).length === 2, { what: 'the payout sent again', timeoutMs: 20_000 });
    const tx = await settled(id);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(rail.fake.payoutsTo(id)).to.have.length(2);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  it('a temporary Result for the latest request (our float short) is sent again only after Transaction Status says Failed with its reason', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712380001', mobile_network: 'safaricom' });
    const tx = await settled(id);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    const mine = rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path);
    expect(mine.filter((p) => p === B2C), JSON.stringify(mine)).to.have.length(2);
    // The second request left only after a Transaction Status query, never on the Result alone.
    expect(mine.slice(0, mine.lastIndexOf(B2C))).to.include(STATUS);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });
});

describe('live M-Pesa on Anvil: payouts not paid are refundable; fiat refunds are sent again until paid', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  before(async () => {
    rail = await startLiveChainRail({ env: { CONFIRMATIONS_BASE: '1', CHAIN_RECONCILE_MS: '3600000', PROVIDER_RETRY_BASE_MS: '100', PROVIDER_MAX_ATTEMPTS: '2', QUOTE_WAIT_MS: '30000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const get = async (id: string) => (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
  const mine = () => rail.anvil.publicClient.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
  const mineUntil = (id: string, ok: (tx: Record<string, any>) => boolean, what: string) =>
    until(async () => { await mine(); const tx = await get(id); return ok(tx) && tx; }, { what, everyMs: 100, timeoutMs: 40_000 });

  it('an external off-ramp whose B2C M-Pesa answers ResultCode 1 every time rests in action_required and is refundable at once', async () => {
    const { account, created, total } = await liveExternalOfframp(rail, '+254712380011');
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, total);
    const stalled = await mineUntil(created.id, (tx) => ['action_required', 'failed', 'completed'].includes(tx.status), 'the payout stalled');
    expect(stalled.status).to.equal('action_required');
    expect(stalled.failure.code).to.equal('provider_unavailable');
    // The status checks may give up before the last Transaction Status answer is applied: refundable once it is.
    const res = await until(async () => {
      const r = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({});
      return r.body?.error?.details?.reason !== 'payout_outcome_unknown' && r;
    }, { what: 'a final answer about the payout', timeoutMs: 20_000, everyMs: 250 });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const refunded = await mineUntil(created.id, (tx) => tx.refund?.status === 'completed', 'the refund mined');
    expect(refunded.refund.amount).to.equal(created.settlement.total_required);
    expect(rail.fake.executions.get(created.id) ?? 0).to.equal(0);
  });

  async function failedDelivery(phone: string): Promise<string> {
    const customer = await createCustomer(rail.api, rail.key);
    const blacklisted = await rail.anvil.walletClient.writeContract({
      address: rail.token, abi: contracts().TestUSDC.abi, functionName: 'blacklist', args: [getAddress(customer.wallet.address)], account: rail.anvil.deployer, chain: rail.anvil.chain,
    });
    await rail.anvil.publicClient.waitForTransactionReceipt({ hash: blacklisted });
    const q = await quote(rail.api, rail.key, { direction: 'onramp', source_amount: '1500', wallet_id: customer.wallet.id });
    const res = await rail.api.http.post(`${BASE}/onramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  }

  it('an on-ramp\'s fiat refund whose B2C was answered HTTP 503 is sent again once Transaction Status says 2032, and pays once', async () => {
    const id = await failedDelivery('+254712380003');
    const back = await mineUntil(id, (tx) => tx.status === 'failed' && tx.refund?.status === 'completed', 'the fiat paid back');
    expect(back.failure.code).to.equal('delivery_failed');
    const paths = rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path);
    // Asked before the second request; the refund's success Result corroborated by Transaction Status before it counts
    // as paid back (a scheduled status check on a loaded machine may ask once more).
    expect(paths.filter((p) => p === B2C), JSON.stringify(paths)).to.have.length(2);
    expect(paths.slice(1, paths.lastIndexOf(B2C)), JSON.stringify(paths)).to.include(STATUS);
    expect(paths.slice(paths.lastIndexOf(B2C) + 1), JSON.stringify(paths)).to.include(STATUS);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  it('an on-ramp\'s fiat refund M-Pesa answers ResultCode 1 (our float short) is sent again after Transaction Status says Failed, until paid', async () => {
    const id = await failedDelivery('+254712380021');
    rail.fake.payoutResults.set(id, ['1', '1']);
    const back = await mineUntil(id, (tx) => tx.status === 'failed' && tx.refund?.status === 'completed', 'the fiat paid back');
    expect(back.refund.provider_reference).to.match(/^[A-Z0-9]{10}$/);
    expect(rail.fake.payoutsTo(id)).to.have.length(3);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  it('an on-ramp\'s fiat refund M-Pesa refuses for good (2040) is failed only until its backoff passes: then a new request, and it pays once', async () => {
    const id = await failedDelivery('+254712380031');
    rail.fake.payoutResults.set(id, ['2040']);
    const refused = await mineUntil(id, (tx) => tx.status === 'failed' && tx.refund?.status === 'failed', 'the fiat refund refused');
    expect(refused.refund.failure.code).to.equal('invalid_receiver');
    const ds = await getDs();
    const [{ due }]: { due: Date | null }[] = await ds.query(`SELECT refund_due_at AS due FROM transactions WHERE id = $1`, [id]);
    expect(due, 'sent again after its backoff').to.be.instanceOf(Date);
    expect(due!.getTime()).to.be.greaterThan(Date.now());
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
    // Its backoff passed and its delayed job lost: the sweeper's rule sends it again as a new request, which pays.
    await ds.query(`UPDATE transactions SET refund_due_at = now() - interval '1 minute' WHERE id = $1`, [id]);
    const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    expect(counts['on-ramp fiat refunds refused, past their backoff']).to.be.greaterThan(0);
    const back = await mineUntil(id, (tx) => tx.refund?.status === 'completed', 'the fiat paid back');
    expect(back.refund.provider_reference).to.match(/^[A-Z0-9]{10}$/);
    expect(back.refund.failure).to.equal(null);
    const conversations = rail.fake.conversationsOf(id);
    expect(conversations).to.have.length(2);
    expect(conversations[1]).to.not.equal(conversations[0]);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });
});
