import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { balance, expectLedgerSound, fund, history, kesBeneficiary, offramp, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { providerCallStats } from '../../shared/providers/sandbox-provider.js';
import { fromMinor, toMinor } from '../../shared/domain/money.js';
import { expireSettlementJob } from '../../workers/settlement/expire-settlement.job.js';
import { until } from '../helpers/until.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { submitOfframp } from '../../shared/domain/offramps.js';
import { countedTransfers, recordTransfer } from '../../shared/domain/settlements.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { joinedBeneficiary } from '../../shared/domain/beneficiaries.js';
import { getConfig } from '../../shared/config.js';
import { loadPayout } from '../../workers/providers/payout-request.js';
import type { WorkerDeps } from '../../workers/job-definition.js';

describe('off-ramps end to end in sandbox', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let beneficiary: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeBusiness()).sandboxKey;
    beneficiary = await kesBeneficiary(api, key);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const offrampQuote = (amount = '100', b = beneficiary) => quote(api, key, { direction: 'offramp', source_amount: amount, beneficiary_id: b });
  /** Waits until the settlement of `id` has counted `amount` received. */
  const received = (id: string, amount: string) =>
    until(async () => (await api.http.get(`${BASE}/transactions/${id}/settlement`).set(bearer(key))).body.received_amount === amount, { what: `${amount} received on ${id}` });

  it('from a managed wallet: the platform sends, the payout is made once, every step is an event', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '200');
    const q = await offrampQuote('100');
    const res = await offramp(api, key, q.id, customer.wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const tx = res.body;
    expect(tx).to.deep.include({ direction: 'offramp', status: 'created', quote_id: q.id, beneficiary_id: beneficiary, wallet_id: customer.wallet.id });
    expect(tx.funding_source).to.deep.equal({ type: 'managed_wallet', reference: customer.wallet.id, address: customer.wallet.address });
    const s = tx.settlement;
    expect(s).to.deep.include({ status: 'awaiting_transfer', amount: '100.000000', fee_amount: '1.500000', total_required: '101.500000', from_address: customer.wallet.address });
    expect(s.to_address).to.match(/^0x[0-9a-fA-F]{40}$/).and.not.equal(customer.wallet.address);
    expect(s.execution).to.deep.include({ method: 'erc20_transfer', to: s.token_address, value: '0' });
    expect(s.execution.data).to.match(/^0xa9059cbb/); // transfer(address,uint256)
    const done = await untilStatus(api, key, tx.id, ['completed', 'failed', 'action_required']);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    expect(done.completed_at).to.be.a('string');
    expect(await history(tx.id)).to.deep.equal(['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const events = await (await getDs()).query(`SELECT type FROM events WHERE data->>'id' = $1 ORDER BY seq`, [tx.id]);
    expect(events.map((e: { type: string }) => e.type)).to.deep.equal(
      ['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'completed'].map((st) => `transaction.${st}`),
    );
    expect(await balance(api, key, customer.wallet.id)).to.equal('98.500000');
    expect((await providerCallStats(await getDs(), 'payout', tx.id)).requests).to.equal(1);
    // In the sandbox the move to signing, the wallet's debit and the move on to awaiting_funds are one database
    // transaction: every row they wrote carries the same xmin.
    const [{ xmins }] = await (await getDs()).query(
      `SELECT count(DISTINCT x)::int AS xmins FROM (
         SELECT xmin::text AS x FROM status_history WHERE resource_id = $1 AND to_status IN ('signing', 'submitting', 'awaiting_funds')
         UNION ALL SELECT xmin::text FROM journal_entries WHERE reference = 'offramp-funding-' || $1::text) t`,
      [tx.id],
    );
    expect(xmins).to.equal(1);
    const settlement = (await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body;
    expect(settlement).to.deep.include({ status: 'confirmed', received_amount: '101.500000', overpaid_amount: null });
    expect(settlement.confirmations).to.equal(settlement.required_confirmations);
    expect(settlement.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
    // The off-ramp reads back as it was created: with its settlement embedded, the same object.
    expect((await api.http.get(`${BASE}/transactions/${tx.id}`).set(bearer(key))).body.settlement).to.deep.equal(settlement);
  });

  it('a managed wallet short of USDC is action_required insufficient_funds; funded and retried, it completes', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '10');
    const tx = (await offramp(api, key, (await offrampQuote('50')).id, customer.wallet.id)).body;
    const stuck = await untilStatus(api, key, tx.id, ['action_required', 'completed', 'failed']);
    expect(stuck.status).to.equal('action_required');
    expect(stuck.failure).to.deep.include({ code: 'insufficient_funds' });
    expect(await balance(api, key, customer.wallet.id)).to.equal('10.000000');
    await fund(api, key, customer.wallet.id, '100');
    const retried = await api.http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key));
    expect(retried.status, JSON.stringify(retried.body)).to.equal(202);
    expect(retried.body.status).to.equal('signing');
    expect((await untilStatus(api, key, tx.id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const again = await api.http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key));
    expect(again.status).to.equal(409);
    expect(again.body.error.code).to.equal('transaction_not_retryable');
  });

  it('a submission job that runs after the off-ramp moved on debits nothing: it reads the row locked, before any debit', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '10');
    const tx = (await offramp(api, key, (await offrampQuote('50')).id, customer.wallet.id)).body;
    expect((await untilStatus(api, key, tx.id, ['action_required', 'completed', 'failed'])).status).to.equal('action_required');
    await fund(api, key, customer.wallet.id, '100');
    // Two submission jobs staged while it was signing, run after it moved to action_required: each reads it locked.
    const answers = await Promise.all([1, 2].map(() => submitOfframp(pools.deps, () => chainFor('sandbox', pools.deps.config), tx.id)));
    expect(await balance(api, key, customer.wallet.id)).to.equal('110.000000');
    const debits: unknown[] = await (await getDs()).query(`SELECT 1 FROM journal_entries WHERE reference = 'offramp-funding-' || $1::text`, [tx.id]);
    expect(debits).to.have.length(0);
    expect(answers).to.deep.equal(['not submittable (action_required)', 'not submittable (action_required)']);
    expect((await api.http.get(`${BASE}/transactions/${tx.id}`).set(bearer(key))).body.status).to.equal('action_required');
  });

  it('from an external wallet: partial transfers add up, confirmations rise, then the payout', async () => {
    const wallet = await verifiedWallet(api, key);
    const tx = (await offramp(api, key, (await offrampQuote('20')).id, wallet.id)).body;
    const short = await api.http.post(`${BASE}/sandbox/settlements/${tx.id}/transfer`).set(writeHeaders(key)).send({});
    expect(short.status).to.equal(409); // the wallet's simulated balance pays: nothing there yet
    expect(short.body.error.details).to.include({ available: '0.000000' });
    await fund(api, key, wallet.id, '25');
    expect(tx.funding_source.type).to.equal('external_wallet');
    const send = (body: object) => api.http.post(`${BASE}/sandbox/settlements/${tx.id}/transfer`).set(writeHeaders(key)).send(body);
    expect((await send({ amount: '10' })).status).to.equal(202);
    await received(tx.id, '10.000000');
    expect((await api.http.get(`${BASE}/transactions/${tx.id}`).set(bearer(key))).body.status).to.equal('created');
    expect((await send({})).status).to.equal(202); // the rest
    expect((await untilStatus(api, key, tx.id, ['completed', 'failed'])).status).to.equal('completed');
    expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    expect((await send({})).status).to.equal(409);
    expect((await send({ amount: '1.0000001' })).status, 'the body is checked before the state').to.equal(400);
    expect(await balance(api, key, wallet.id)).to.equal(fromMinor(toMinor('25', 6) - toMinor(tx.settlement.total_required, 6), 6)); // debited by the off-ramp
  });

  it('a sandbox transfer job carries the transfer, not its amount: a forged job (an amount in its data, a made-up hash) credits only what was booked (CONTRACT §18)', async () => {
    const wallet = await verifiedWallet(api, key);
    const tx = (await offramp(api, key, (await offrampQuote('20')).id, wallet.id)).body;
    await fund(api, key, wallet.id, '5');
    const settlementId = (await (await getDs()).query(`SELECT id FROM settlements WHERE transaction_id = $1`, [tx.id]))[0].id;
    expect((await api.http.post(`${BASE}/sandbox/settlements/${tx.id}/transfer`).set(writeHeaders(key)).send({ amount: '2' })).status).to.equal(202);
    await received(tx.id, '2.000000');
    const [{ hash }] = await (await getDs()).query(`SELECT metadata->>'transaction_hash' AS hash FROM journal_entries WHERE reference LIKE $1`, [`deposit-${settlementId}-%`]);
    // Anyone who can add a job: the real transfer again with a far larger amount, and one the control never accepted.
    const queue = pools.deps.queues.sandbox;
    const forged = [
      await queue.add('sandbox.transfer' as never, { settlementId, transactionHash: hash, amount: '1000' } as never, { jobId: `forged-1-${Date.now()}` }),
      await queue.add('sandbox.transfer' as never, { settlementId, transactionHash: `0x${'ab'.repeat(32)}`, amount: '1000' } as never, { jobId: `forged-2-${Date.now()}` }),
    ];
    for (const job of forged) await until(async () => (await job.getState()) === 'completed', { what: `forged job ${job.id} done` });
    expect((await queue.getJob(forged[1].id!))!.returnvalue).to.equal('no such transfer');
    expect((await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body.received_amount).to.equal('2.000000');
  });

  it('a payout the provider rejects fails the transaction and returns the funds to the managed wallet', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '60');
    const rejecting = await kesBeneficiary(api, key, '+254722480002');
    const tx = (await offramp(api, key, (await offrampQuote('50', rejecting)).id, customer.wallet.id)).body;
    const failed = await untilStatus(api, key, tx.id, ['failed', 'completed']);
    expect(failed.status).to.equal('failed');
    expect(failed.failure.code).to.equal('payout_rejected');
    expect(failed.refund).to.deep.include({ status: 'completed', amount: '50.750000' });
    expect(await balance(api, key, customer.wallet.id)).to.equal('60.000000');
    expect((await history(tx.id)).slice(-3)).to.deep.equal(['funded', 'processing', 'failed']);
  });

  it('a provider that keeps failing leaves it action_required; after simulate completed, a retry pays it once', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '40');
    const flaky = await kesBeneficiary(api, key, '+254722480003');
    const tx = (await offramp(api, key, (await offrampQuote('30', flaky)).id, customer.wallet.id)).body;
    const stuck = await untilStatus(api, key, tx.id, ['action_required', 'failed', 'completed']);
    expect(stuck.status).to.equal('action_required');
    expect(stuck.failure.code).to.equal('provider_unavailable');
    expect((await providerCallStats(await getDs(), 'payout', tx.id)).attempts).to.equal(2); // PROVIDER_MAX_ATTEMPTS in test/setup.ts
    const forced = await api.http.post(`${BASE}/sandbox/transactions/${tx.id}/simulate`).set(writeHeaders(key)).send({ outcome: 'completed' });
    expect(forced.status, JSON.stringify(forced.body)).to.equal(200);
    expect((await api.http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key))).status).to.equal(202);
    expect((await untilStatus(api, key, tx.id, ['completed', 'failed'])).status).to.equal('completed');
    expect((await history(tx.id)).slice(-5)).to.deep.equal(['funded', 'action_required', 'funded', 'processing', 'completed']);
  });

  it('a settlement that expires with nothing received fails the transaction; with part received it is underpaid', async () => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, '20');
    const empty = (await offramp(api, key, (await offrampQuote('5')).id, wallet.id)).body;
    const partial = (await offramp(api, key, (await offrampQuote('5')).id, wallet.id)).body;
    await api.http.post(`${BASE}/sandbox/settlements/${partial.id}/transfer`).set(writeHeaders(key)).send({ amount: '1' });
    await received(partial.id, '1.000000');
    await (await getDs()).query(`UPDATE settlements SET expires_at = now() - interval '1 second' WHERE transaction_id = ANY($1)`, [[empty.id, partial.id]]);
    for (const id of [empty.id, partial.id]) await expireSettlementJob.process({ data: { transactionId: id } } as never, pools.deps);
    const failed = (await api.http.get(`${BASE}/transactions/${empty.id}`).set(bearer(key))).body;
    expect(failed).to.deep.include({ status: 'failed' });
    expect(failed.failure.code).to.equal('settlement_expired');
    const underpaid = (await api.http.get(`${BASE}/transactions/${partial.id}`).set(bearer(key))).body;
    expect(underpaid.status).to.equal('action_required');
    expect(underpaid.failure).to.deep.include({ code: 'underpaid' });
    expect(underpaid.failure.details).to.deep.equal({ received_amount: '1.000000', total_required: partial.settlement.total_required });
    expect((await api.http.get(`${BASE}/transactions/${partial.id}/settlement`).set(bearer(key))).body.status).to.equal('underpaid');
    // A late deposit on the expired one: counted, and the failed off-ramp is reopened for the business.
    expect((await api.http.post(`${BASE}/sandbox/settlements/${empty.id}/transfer`).set(writeHeaders(key)).send({})).status).to.equal(202);
    const late = await untilStatus(api, key, empty.id, ['action_required']);
    expect(late.failure.code).to.equal('late_deposit');
    expect(late.failure.details.received_amount).to.equal(empty.settlement.total_required);
    expect((await api.http.get(`${BASE}/transactions/${empty.id}/settlement`).set(bearer(key))).body).to.deep.include({ status: 'expired', received_amount: empty.settlement.total_required });
  });

  it('a transfer is recorded once with what its send recorded (one statement); seen again, only the send\'s record is written', async () => {
    const wallet = await verifiedWallet(api, key);
    const created = (await offramp(api, key, (await offrampQuote('5')).id, wallet.id)).body;
    const ds = await getDs();
    const [settlement] = await ds.query(`SELECT * FROM settlements WHERE transaction_id = $1`, [created.id]);
    const transfer = { transactionHash: `0x${'ab'.repeat(32)}`, logIndex: 0, amount: 2_000_000n, blockNumber: 7n, blockHash: `0x${'cd'.repeat(32)}` };
    const first = await inUnit(api.deps, (unit) => recordTransfer(unit, settlement, transfer, { submitted: { nonce: 1 } }));
    expect([first.isNew, first.observation !== null, first.settlement.received_amount, first.settlement.block_number]).to.deep.equal([true, true, '2.000000', '7']);
    expect(first.settlement.execution).to.deep.include({ submitted: { nonce: 1 } });
    const again = await inUnit(api.deps, (unit) => recordTransfer(unit, first.settlement, transfer, { submitted: { nonce: 2 } }));
    expect([again.isNew, again.observation]).to.deep.equal([false, null]);
    const [now] = await ds.query(`SELECT received_amount::text, execution FROM settlements WHERE id = $1`, [settlement.id]);
    expect(now).to.deep.equal({ received_amount: '2.000000', execution: { ...first.settlement.execution, submitted: { nonce: 2 } } });
    expect((await ds.query(`SELECT count(*)::int AS n FROM settlement_transfers WHERE settlement_id = $1`, [settlement.id]))[0].n).to.equal(1);
    // A new transfer's statement also answers every transfer the settlement counts, as countedTransfers reads them.
    const second = await inUnit(api.deps, (unit) => recordTransfer(unit, again.settlement, { ...transfer, logIndex: 1, amount: 500_000n }));
    const read = await countedTransfers(ds, settlement.id);
    expect(second.transfers!.counted).to.deep.equal(read.counted).and.have.length(2);
    expect(Math.abs(second.transfers!.lastAt!.getTime() - read.lastAt!.getTime())).to.be.below(1);
    expect(again.transfers).to.equal(undefined);
  });

  it('a quote starts one transaction: of 20 concurrent off-ramps on it exactly one is created', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '20');
    const q = await offrampQuote('10');
    const answers = await Promise.all(Array.from({ length: 20 }, () => offramp(api, key, q.id, customer.wallet.id)));
    expect(answers.filter((a) => a.status === 201)).to.have.length(1);
    for (const a of answers.filter((x) => x.status !== 201)) expect(a.body.error.code).to.equal('quote_already_used');
    const [{ n }] = await (await getDs()).query(`SELECT count(*)::int AS n FROM transactions WHERE quote_id = $1`, [q.id]);
    expect(n).to.equal(1);
  });

  it('refuses expired, pending, mismatched quotes and unusable wallets with their codes', async () => {
    const customer = await createCustomer(api, key);
    const refuse = async (res: { status: number; body: any }, status: number, code: string) => {
      expect(res.status, JSON.stringify(res.body)).to.equal(status);
      expect(res.body.error.code).to.equal(code);
    };
    const expired = await offrampQuote('5');
    await (await getDs()).query(`UPDATE quotes SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    await refuse(await offramp(api, key, expired.id, customer.wallet.id), 422, 'quote_expired');
    const onrampQuote = await quote(api, key, { direction: 'onramp', destination_amount: '5', wallet_id: customer.wallet.id });
    await refuse(await offramp(api, key, onrampQuote.id, customer.wallet.id), 422, 'quote_direction_mismatch');
    const unverified = (await api.http.post(`${BASE}/wallets`).set(writeHeaders(key)).send({ address: '0x000000000000000000000000000000000000dEaD', chain: 'base' })).body;
    await refuse(await offramp(api, key, (await offrampQuote('5')).id, unverified.id), 422, 'wallet_not_verified');
    await refuse(await offramp(api, key, '00000000-0000-4000-8000-000000000000', customer.wallet.id), 404, 'not_found');
    // The wallet is read with the quote: one of another business, or none, is not found; an archived one is refused.
    const other = await createCustomer(api, (await makeBusiness()).sandboxKey);
    for (const walletId of [other.wallet.id, '00000000-0000-4000-8000-000000000000']) {
      const missing = await offramp(api, key, (await offrampQuote('5')).id, walletId);
      await refuse(missing, 404, 'not_found');
      expect(missing.body.error.details).to.deep.equal({ param: 'wallet_id' });
    }
    const archived = await verifiedWallet(api, key);
    await api.http.delete(`${BASE}/wallets/${archived.id}`).set(writeHeaders(key));
    await refuse(await offramp(api, key, (await offrampQuote('5')).id, archived.id), 409, 'resource_archived');
  });

  it('a failed off-ramp stays failed: its deposit address closes, a later transfer is a late deposit and is never paid out', async () => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, '50');
    const tx = (await offramp(api, key, (await offrampQuote('10')).id, wallet.id)).body;
    const send = (body: object) => api.http.post(`${BASE}/sandbox/settlements/${tx.id}/transfer`).set(writeHeaders(key)).send(body);
    await send({ amount: '2' });
    await received(tx.id, '2.000000');
    const failed = await api.http.post(`${BASE}/sandbox/transactions/${tx.id}/simulate`).set(writeHeaders(key)).send({ outcome: 'failed' });
    expect(failed.body.refund).to.deep.include({ status: 'completed', amount: '2.000000' });
    expect(await balance(api, key, wallet.id)).to.equal('50.000000'); // the 2 came back
    expect((await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body.status).to.equal('expired');
    expect((await send({})).status).to.equal(202);
    const late = await untilStatus(api, key, tx.id, ['action_required']);
    expect(late.failure.code).to.equal('late_deposit');
    await new Promise((r) => setTimeout(r, 100));
    expect((await api.http.get(`${BASE}/transactions/${tx.id}`).set(bearer(key))).body.status).to.equal('action_required');
    expect(await providerCallStats(await getDs(), 'payout', tx.id)).to.include({ requests: 0 });
    // Failed again: only the late deposit goes back this time, and the refund reports everything returned.
    const again = await api.http.post(`${BASE}/sandbox/transactions/${tx.id}/simulate`).set(writeHeaders(key)).send({ outcome: 'failed' });
    expect(again.body.refund).to.deep.include({ status: 'completed', amount: tx.settlement.total_required });
    expect(await balance(api, key, wallet.id)).to.equal('50.000000');
  });

  it('transfers the external wallet cannot cover are refused at once, even when sent together', async () => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, '10');
    const first = (await offramp(api, key, (await offrampQuote('6')).id, wallet.id)).body;
    const second = (await offramp(api, key, (await offrampQuote('6')).id, wallet.id)).body;
    const answers = await Promise.all([first, second].map((t) => api.http.post(`${BASE}/sandbox/settlements/${t.id}/transfer`).set(writeHeaders(key)).send({})));
    expect(answers.map((a) => a.status).sort()).to.deep.equal([202, 409]);
    expect(await balance(api, key, wallet.id)).to.equal(fromMinor(toMinor('10', 6) - toMinor(first.settlement.total_required, 6), 6));
  });

  it('an archived beneficiary gets no new off-ramp, and the quote stays usable for nothing else', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '20');
    const archived = await kesBeneficiary(api, key);
    const q = await offrampQuote('10', archived);
    await api.http.delete(`${BASE}/beneficiaries/${archived}`).set(writeHeaders(key));
    const res = await offramp(api, key, q.id, customer.wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(409);
    expect(res.body.error.code).to.equal('resource_archived');
    expect((await api.http.get(`${BASE}/quotes/${q.id}`).set(bearer(key))).body.status).to.equal('available');
  });

  it('the payout job reads the off-ramp and its beneficiary in one statement: the transaction alone, the details opened, archived or not', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '20');
    const own = await kesBeneficiary(api, key, '+254722480177');
    const res = await offramp(api, key, (await offrampQuote('10', own)).id, customer.wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const deps = { ds: await getDs(), config: getConfig() } as unknown as WorkerDeps;
    const read = async () => {
      const payout = (await loadPayout(deps.ds, res.body.id))!;
      return { payout, beneficiary: joinedBeneficiary(payout.row, deps.config.encryptionKeys)! };
    };
    const { payout, beneficiary } = await read();
    // The transaction as loadTransaction reads it, without the beneficiary's (sealed) columns beside it.
    expect(Object.keys(payout.tx)).to.deep.equal(Object.keys((await loadTransaction(deps.ds, res.body.id))!));
    expect(payout.tx).to.include({ id: res.body.id, beneficiary_id: own });
    expect(beneficiary.beneficiary).to.include({ id: own, status: 'active', account_holder_name: 'Amina W' });
    expect(Object.keys(beneficiary.beneficiary).filter((k) => k.startsWith('details'))).to.deep.equal([]);
    expect(beneficiary.details).to.deep.equal({ phone_number: '+254722480177', mobile_network: 'safaricom' });
    // Archived while the payout is under way: it still reaches the beneficiary it was started for.
    expect((await api.http.delete(`${BASE}/beneficiaries/${own}`).set(writeHeaders(key))).status).to.equal(200);
    const after = await read();
    expect(after.beneficiary.beneficiary.status).to.equal('archived');
    expect(after.beneficiary.details).to.deep.equal(beneficiary.details);
    await untilStatus(api, key, res.body.id, ['completed']);
  });
});

// Issue 26: the sandbox's confirmations rise with time, so they are counted once when the transfer is seen and once
// when all are there, never a job and a database transaction per step.
describe('sandbox confirmations counted from time', function () {
  this.timeout(30_000);
  const STEP_MS = '100';
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;

  before(async () => {
    api = await startApi({ env: { SANDBOX_STEP_MS: STEP_MS } });
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox'], { env: { SANDBOX_STEP_MS: STEP_MS } });
    key = (await makeBusiness()).sandboxKey;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });

  it('an off-ramp\'s 12 confirmations take one confirmation job, when the depth is reached (the first count is the transfer\'s own)', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '50');
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, key) });
    const tx = (await offramp(api, key, q.id, customer.wallet.id)).body;
    const done = await untilStatus(api, key, tx.id, ['completed', 'failed', 'action_required']);
    expect(done.status).to.equal('completed');
    const checks: { n: number }[] = await (await getDs()).query(
      `SELECT count(*)::int AS n FROM outbox_jobs WHERE job_name = 'settlement.confirm' AND payload->>'transactionId' = $1`, [tx.id]);
    expect(checks[0].n).to.equal(1);
    const [settlement] = await (await getDs()).query(
      `SELECT confirmations, required_confirmations, extract(epoch FROM confirmed_at - detected_at) * 1000 AS ms FROM settlements WHERE transaction_id = $1`, [tx.id]);
    expect(settlement.confirmations).to.equal(settlement.required_confirmations);
    // Not before the depth: (12 - 1) steps after the transfer was seen.
    expect(Number(settlement.ms)).to.be.at.least((settlement.required_confirmations - 1) * Number(STEP_MS) - 5);
  });
});
