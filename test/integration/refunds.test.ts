// CONTRACT section 14: every way an off-ramp comes to hold USDC it will not pay out has an exit, on request
// (POST /transactions/{id}/refund) or on its own (an excess after the payout, underpaid or late deposits after
// AUTO_REFUND_AFTER_SECONDS).
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer, newAccount } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { balance, expectLedgerSound, fund, history, kesBeneficiary, offramp, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { providerCallStats } from '../../shared/providers/sandbox-provider.js';
import { fromMinor, toMinor } from '../../shared/domain/money.js';
import { STUCK_RULES } from '../../shared/domain/stuck.js';
import { expireSettlementJob } from '../../workers/settlement/expire-settlement.job.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import type { ChainAdapter } from '../../shared/chain/adapter.js';
import { completeRefund, refundSendFailed, returnHeldFunds } from '../../shared/domain/refunds.js';
import { lockTransaction } from '../../shared/domain/transactions.js';
import { sandboxWalletTransfer } from '../../shared/domain/wallet-balances.js';

const HASH = /^0x[0-9a-f]{64}$/;
const usdc = (value: bigint) => fromMinor(value, 6);
const minor = (value: string) => toMinor(value, 6);

describe('refunds: every unit of money has an exit', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let businessId: string;
  let beneficiary: string;

  before(async () => {
    // The settlement's real deadline (the API stages the expiry) and a short wait before automatic refunds.
    api = await startApi({ env: { SETTLEMENT_TTL_SECONDS: '10' } });
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox'], { env: { AUTO_REFUND_AFTER_SECONDS: '1' } });
    // Polling tests: a key no poll meets the rate limit of.
    businessId = (await makeBusiness()).businessId;
    key = (await makeKey(businessId, { rateLimit: 1_000_000 })).key;
    beneficiary = await kesBeneficiary(api, key);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const offrampQuote = (amount: string, b = beneficiary) => quote(api, key, { direction: 'offramp', source_amount: amount, beneficiary_id: b });
  const get = async (id: string) => (await api.http.get(`${BASE}/transactions/${id}`).set(bearer(key))).body;
  const transfer = (id: string, amount?: string) => api.http.post(`${BASE}/sandbox/settlements/${id}/transfer`).set(writeHeaders(key)).send(amount ? { amount } : {});
  const refund = (id: string, body: object = {}, idempotencyKey?: string) => api.http.post(`${BASE}/transactions/${id}/refund`).set(writeHeaders(key, idempotencyKey)).send(body);
  const received = (id: string, amount: string) =>
    until(async () => (await api.http.get(`${BASE}/transactions/${id}/settlement`).set(bearer(key))).body.received_amount === amount, { what: `${amount} received on ${id}` });
  /** The settlement's deadline passes now (the expiry job, run as its delayed run would). */
  const expireNow = async (id: string) => {
    await (await getDs()).query(`UPDATE settlements SET expires_at = now() - interval '1 second' WHERE transaction_id = $1`, [id]);
    await expireSettlementJob.process({ data: { transactionId: id } } as never, pools.deps);
  };
  const refundEntries = async (id: string) => {
    const rows: { amount: string }[] = await (await getDs()).query(
      `SELECT e.reference, p.amount::text FROM journal_entries e JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'offramp_refund' AND e.metadata->>'settlement_id' = (SELECT id::text FROM settlements WHERE transaction_id = $1) AND a.kind = 'settlement_clearing'`,
      [id],
    );
    return rows.map((r) => usdc(BigInt(r.amount)));
  };
  /** An external wallet holding `funds`, and an off-ramp of `amount` from it. */
  const externalOfframp = async (funds: string, amount: string, extra: object = {}) => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, funds);
    const q = await offrampQuote(amount);
    const res = await api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: q.id, funding_source: { wallet_id: wallet.id }, ...extra });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { wallet, tx: res.body };
  };

  it('underpaid: retry is refused, a refund on request returns what arrived and the off-ramp fails refund_requested; a replay changes nothing', async () => {
    const { wallet, tx } = await externalOfframp('20', '10');
    expect(tx.refund_address).to.equal(null);
    await transfer(tx.id, '4');
    await received(tx.id, '4.000000');
    await expireNow(tx.id);
    expect((await get(tx.id)).failure.code).to.equal('underpaid');
    expect(await balance(api, key, wallet.id)).to.equal('16.000000');

    const retried = await api.http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key));
    expect(retried.status).to.equal(409);
    expect(retried.body.error).to.deep.include({ code: 'transaction_not_retryable' });
    expect(retried.body.error.details.reason).to.equal('underpaid');

    const idem = `refund-${randomUUID()}`;
    const res = await refund(tx.id, {}, idem);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.status).to.equal('failed');
    expect(res.body.failure.code).to.equal('refund_requested');
    expect(res.body.refund).to.deep.include({ status: 'completed', amount: '4.000000', to_address: wallet.address });
    expect(res.body.refund.transaction_hash).to.match(HASH);
    expect(await balance(api, key, wallet.id)).to.equal('20.000000');
    expect((await history(tx.id)).slice(-2)).to.deep.equal(['action_required', 'failed']);
    expect((await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body.status).to.equal('expired');

    const replay = await refund(tx.id, {}, idem);
    expect(replay.status).to.equal(202);
    expect(replay.headers['idempotent-replayed']).to.equal('true');
    expect(replay.body).to.deep.equal(res.body);
    const again = await refund(tx.id);
    expect(again.status).to.equal(409);
    expect(again.body.error.details).to.deep.equal({ reason: 'nothing_to_refund', status: 'failed' });
    expect(await refundEntries(tx.id)).to.deep.equal(['-4.000000']); // one entry, out of the settlement's clearing
    expect(await balance(api, key, wallet.id)).to.equal('20.000000');
  });

  it('underpaid at its real deadline, then topped up above total_required: refunded in full on its own, failure code kept', async () => {
    const { wallet, tx } = await externalOfframp('30', '10');
    await transfer(tx.id, '4');
    // SETTLEMENT_TTL_SECONDS=10: expiry.settlements makes it underpaid once its expires_at has passed.
    const underpaid = await until(async () => { const t = await get(tx.id); return t.status === 'action_required' && t; }, { what: 'underpaid at expiry', timeoutMs: 20_000 });
    expect(underpaid.failure.code).to.equal('underpaid');
    // The business tops it up to 21 against 10.15: too late for the quote's price.
    expect((await transfer(tx.id, '17')).status).to.equal(202);
    const done = await untilStatus(api, key, tx.id, ['failed']);
    expect(done.failure.code).to.equal('late_deposit');
    expect(done.refund).to.deep.include({ status: 'completed', amount: '21.000000', to_address: wallet.address });
    expect(await balance(api, key, wallet.id)).to.equal('30.000000');
    expect(await providerCallStats(await getDs(), 'payout', tx.id)).to.include({ requests: 0 });
    expect((await history(tx.id)).slice(-2)).to.deep.equal(['action_required', 'failed']);
  });

  it('a late deposit on an expired off-ramp is refunded on its own after AUTO_REFUND_AFTER_SECONDS', async () => {
    const { wallet, tx } = await externalOfframp('20', '10');
    await expireNow(tx.id);
    expect((await get(tx.id)).failure.code).to.equal('settlement_expired');
    expect((await transfer(tx.id)).status).to.equal(202);
    const late = await untilStatus(api, key, tx.id, ['action_required']);
    expect(late.failure.code).to.equal('late_deposit');
    const [{ due }]: { due: Date }[] = await (await getDs()).query(`SELECT refund_due_at AS due FROM transactions WHERE id = $1`, [tx.id]);
    const done = await untilStatus(api, key, tx.id, ['failed']);
    expect(Date.now() - due.getTime(), 'within 10 s of the deadline').to.be.below(10_000);
    expect(done.failure.code).to.equal('late_deposit');
    expect(done.refund).to.deep.include({ status: 'completed', amount: tx.settlement.total_required, to_address: wallet.address });
    expect(await balance(api, key, wallet.id)).to.equal('20.000000');
    expect(await history(tx.id)).to.deep.equal(['created', 'failed', 'action_required', 'failed']);
  });

  it('an overpayment: the payout completes and the excess goes back; the transaction stays completed', async () => {
    const { wallet, tx } = await externalOfframp('30', '20');
    expect((await transfer(tx.id, '25')).status).to.equal(202);
    const done = await until(async () => { const t = await get(tx.id); return t.refund?.status === 'completed' && t; }, { what: 'excess returned' });
    expect(done.status).to.equal('completed');
    const excess = usdc(minor('25') - minor(tx.settlement.total_required));
    expect(done.refund).to.deep.include({ amount: excess, to_address: wallet.address });
    expect(done.refund.transaction_hash).to.match(HASH);
    expect(await balance(api, key, wallet.id)).to.equal(usdc(minor('30') - minor(tx.settlement.total_required)));
    expect(await refundEntries(tx.id)).to.deep.equal([`-${excess}`]);
    expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    expect((await providerCallStats(await getDs(), 'payout', tx.id)).requests).to.equal(1);
    const events = await (await getDs()).query(`SELECT type, data->'refund' AS refund FROM events WHERE data->>'id' = $1 AND type = 'transaction.completed' ORDER BY seq`, [tx.id]);
    expect(events.map((e: { refund: unknown }) => e.refund)).to.deep.equal([null, done.refund]);
    expect((await refund(tx.id)).body.error.details).to.deep.equal({ reason: 'not_refundable_status', status: 'completed' });
  });

  it('refund_address is honoured: given at creation, given on the request; refused for managed wallets and bad addresses', async () => {
    const elsewhere = newAccount().address;
    const { wallet, tx } = await externalOfframp('20', '10', { refund_address: elsewhere.toLowerCase() });
    expect(tx.refund_address).to.equal(elsewhere);
    await transfer(tx.id, '3');
    await received(tx.id, '3.000000');
    await expireNow(tx.id);
    const res = await refund(tx.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.refund).to.deep.include({ status: 'completed', amount: '3.000000', to_address: elsewhere });
    expect(await balance(api, key, wallet.id), 'sent elsewhere, not to the wallet').to.equal('17.000000');

    // Named on the request: it becomes the off-ramp's refund destination.
    const other = await externalOfframp('20', '10');
    await transfer(other.tx.id, '2');
    await received(other.tx.id, '2.000000');
    await expireNow(other.tx.id);
    const target = newAccount().address;
    const named = await refund(other.tx.id, { refund_address: target });
    expect(named.status, JSON.stringify(named.body)).to.equal(202);
    expect(named.body).to.deep.include({ refund_address: target });
    expect(named.body.refund).to.deep.include({ amount: '2.000000', to_address: target });

    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '20');
    const managed = await api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: (await offrampQuote('10')).id, funding_source: { wallet_id: customer.wallet.id }, refund_address: target });
    expect(managed.status).to.equal(400);
    expect(managed.body.error.code).to.equal('invalid_request');
    const badChecksum = `0x${target.slice(2).split('').map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join('')}`;
    if (badChecksum !== target) {
      const bad = await api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: (await offrampQuote('10')).id, funding_source: { wallet_id: wallet.id }, refund_address: badChecksum });
      expect(bad.status).to.equal(400);
    }
    expect((await refund(other.tx.id, { refund_address: 'nope' })).status).to.equal(400);
  });

  it('answers 409 transaction_not_refundable with each reason; a managed wallet\'s stalled payout, once its outcome is known, goes back to it', async () => {
    // onramp
    const customer = await createCustomer(api, key);
    const onrampQuote = await quote(api, key, { direction: 'onramp', destination_amount: '5', wallet_id: customer.wallet.id });
    const onramp = await api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({ quote_id: onrampQuote.id, payment_method: { type: 'mobile_money', phone_number: '+254722480163', mobile_network: 'safaricom' } });
    expect((await refund(onramp.body.id)).body.error.details).to.deep.include({ reason: 'onramp' });
    // not_refundable_status: still waiting for its transfer
    const { tx: waiting } = await externalOfframp('20', '10');
    const early = await refund(waiting.id);
    expect(early.status).to.equal(409);
    expect(early.body.error).to.deep.include({ code: 'transaction_not_refundable', details: { reason: 'not_refundable_status', status: 'created' } });
    // nothing_to_refund: failed with nothing received
    await expireNow(waiting.id);
    expect((await refund(waiting.id)).body.error.details).to.deep.equal({ reason: 'nothing_to_refund', status: 'failed' });
    // payout_outcome_unknown: a payout request without a final answer (as a live one left unanswered would be)
    const payer = await createCustomer(api, key);
    await fund(api, key, payer.wallet.id, '40');
    const flaky = await kesBeneficiary(api, key, '+254722480003');
    const tx = (await offramp(api, key, (await offrampQuote('30', flaky)).id, payer.wallet.id)).body;
    const stuck = await untilStatus(api, key, tx.id, ['action_required', 'failed', 'completed']);
    expect(stuck.failure.code).to.equal('provider_unavailable');
    const ds = await getDs();
    await ds.query(`UPDATE provider_requests SET status = 'pending' WHERE kind = 'payout' AND reference = $1`, [tx.id]);
    const unknown = await refund(tx.id);
    expect(unknown.status).to.equal(409);
    expect(unknown.body.error.details).to.deep.equal({ reason: 'payout_outcome_unknown', status: 'action_required' });
    expect(await balance(api, key, payer.wallet.id)).to.equal(usdc(minor('40') - minor(tx.settlement.total_required)));
    // The provider's answer comes: it did not pay. The USDC goes back to the managed wallet's balance (no chain hash).
    await ds.query(`UPDATE provider_requests SET status = 'temporary_failure' WHERE kind = 'payout' AND reference = $1`, [tx.id]);
    const back = await refund(tx.id);
    expect(back.status, JSON.stringify(back.body)).to.equal(202);
    expect(back.body.failure).to.deep.include({ code: 'refund_requested' });
    expect(back.body.refund).to.deep.equal({ status: 'completed', amount: tx.settlement.total_required, to_address: payer.wallet.address, transaction_hash: null });
    expect(await balance(api, key, payer.wallet.id)).to.equal('40.000000');
  });

  it('two returns in flight, the earlier failing and the later mined: the refund is failed, its amount due and sent again (CONTRACT §18)', async () => {
    const { wallet, tx } = await externalOfframp('30', '20');
    expect((await transfer(tx.id)).status).to.equal(202);
    await untilStatus(api, key, tx.id, ['completed']);
    const [{ id: settlementId }]: { id: string }[] = await (await getDs()).query(`SELECT id FROM settlements WHERE transaction_id = $1`, [tx.id]);
    const ds = await getDs();
    // A live chain stages each return as a send that completes (or fails) when its receipt comes: this one stages.
    const sandbox = chainFor('sandbox', pools.deps.config);
    const staging: ChainAdapter = Object.assign(Object.create(sandbox), { refund: async () => null });
    /** `amount` more arrives after the payout; its return is decided now (the offramp.refund job, on a live chain). */
    const excess = async (amount: string, total: string) => {
      // Held until this test decides it: the pools' own run of the job finds it not due yet.
      await ds.query(`UPDATE transactions SET refund_due_at = now() + interval '1 day' WHERE id = $1`, [tx.id]);
      // A transfer to the closed settlement's address (the sandbox API plays only open ones): an excess of a completed off-ramp.
      await inUnit(api.deps, (unit) => sandboxWalletTransfer(unit, pools.deps.config, { businessId, environment: 'sandbox' }, { settlementId, walletId: wallet.id, chain: 'base', amount: minor(amount) }));
      await received(tx.id, total);
      const done = await inUnit(pools.deps, async (unit) => {
        await unit.em.query(`UPDATE transactions SET refund_due_at = now() - interval '1 minute' WHERE id = $1`, [tx.id]);
        return returnHeldFunds(unit, staging, tx.id);
      });
      expect(done).to.equal('excess returned');
    };
    const required = minor(tx.settlement.total_required);
    await excess('3', usdc(required + minor('3')));
    await excess('2', usdc(required + minor('5')));
    const [{ refund }]: { refund: { sends: { reference: string; amount: string; status: string }[] } }[] = await ds.query(`SELECT refund FROM transactions WHERE id = $1`, [tx.id]);
    const [first, second] = refund.sends;
    expect([first, second].map((s) => [s.amount, s.status])).to.deep.equal([['3000000', 'pending'], ['2000000', 'pending']]);
    // The chain's answers, as the chain.send job applies them: the earlier reverted, the later mined.
    await inUnit(pools.deps, async (unit) => refundSendFailed(unit, (await lockTransaction(unit, tx.id))!, `refund-${first.reference}`));
    await inUnit(pools.deps, async (unit) => completeRefund(unit, (await lockTransaction(unit, tx.id))!, { reference: `refund-${second.reference}`, amount: 2_000_000n, hash: `0x${'b'.repeat(64)}` }));
    const left = await get(tx.id);
    expect(left.status).to.equal('completed');
    expect(left.refund).to.deep.include({ status: 'failed', amount: '2.000000' });
    const [{ due }]: { due: Date | null }[] = await ds.query(`SELECT refund_due_at AS due FROM transactions WHERE id = $1`, [tx.id]);
    expect(due, 'the failed amount is scheduled to go again').to.be.instanceOf(Date);
    // Its backoff passed and its job lost: the sweeper's rule finds it, and its job returns the 3 USDC.
    await ds.query(`UPDATE transactions SET refund_due_at = now() - interval '1 minute' WHERE id = $1`, [tx.id]);
    const rule = STUCK_RULES.find((r) => r.name === 'off-ramp refunds past their due time')!;
    const job = (await rule.find(ds, 1000, pools.deps.config)).find((j) => (j.data as { transactionId: string }).transactionId === tx.id);
    expect(job, 'the sweeper names its refund job').to.not.equal(undefined);
    const { refundOfframpJob } = await import('../../workers/settlement/refund-offramp.job.js');
    expect(await refundOfframpJob.process({ data: job!.data } as never, pools.deps)).to.be.oneOf(['excess returned', 'not due']);
    const done = await until(async () => { const t = await get(tx.id); return t.refund.status === 'completed' && t; }, { what: 'the failed amount returned' });
    expect(done).to.deep.include({ status: 'completed' });
    expect(done.refund.amount).to.equal('5.000000');
    expect((await refundEntries(tx.id)).sort()).to.deep.equal(['-2.000000', '-3.000000']);
  });

  it('the sweeper finds a refund past its due time whose job was lost', async () => {
    const { tx } = await externalOfframp('20', '10');
    await transfer(tx.id, '1');
    await received(tx.id, '1.000000');
    const ds = await getDs();
    // Underpaid long ago, its delayed job gone: the deadline passed more than the sweeper's staleness ago.
    await ds.query(`UPDATE settlements SET status = 'underpaid' WHERE transaction_id = $1`, [tx.id]);
    await ds.query(
      `UPDATE transactions SET status = 'action_required', stalled_at = 'created', failure = '{"code": "underpaid", "message": "m"}', refund_due_at = now() - interval '1 minute' WHERE id = $1`,
      [tx.id],
    );
    const rule = STUCK_RULES.find((r) => r.name === 'off-ramp refunds past their due time')!;
    const jobs = await rule.find(ds, 1000, pools.deps.config);
    const job = jobs.find((j) => (j.data as { transactionId: string }).transactionId === tx.id);
    expect(job, 'the sweeper names its refund job').to.not.equal(undefined);
    expect(job!.name).to.equal('offramp.refund');
    // The job runs as the worker would run it (the pools' own scheduled sweep may have run it first: once either way).
    const { refundOfframpJob } = await import('../../workers/settlement/refund-offramp.job.js');
    expect(await refundOfframpJob.process({ data: job!.data } as never, pools.deps)).to.be.oneOf(['refunded', 'not due']);
    expect(await refundEntries(tx.id)).to.deep.equal(['-1.000000']);
    const done = await get(tx.id);
    expect(done).to.deep.include({ status: 'failed' });
    expect(done.failure.code).to.equal('underpaid');
    expect(done.refund.amount).to.equal('1.000000');
    expect((await rule.find(ds, 1000, pools.deps.config)).some((j) => (j.data as { transactionId: string }).transactionId === tx.id)).to.equal(false);
  });
});
