// CONTRACT section 16: liquidation addresses. A permanent deposit address tied to a beneficiary; each confirmed USDC
// transfer to it becomes an off-ramp priced then (fees from what arrived), returned to its sender when it cannot be
// paid out (outside the corridor's limits, or after the address was archived). Sandbox through the control; live on
// Anvil through the same chain watcher as settlements, paid out through the Daraja stand-in, and swept.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { erc20Abi, getAddress, parseEther, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, history, kesBeneficiary } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { mintUsdc } from '../helpers/chain.js';
import { liveBeneficiary, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { DEFAULT_PLATFORM_FEE, priceQuote } from '../../shared/domain/pricing.js';
import { SANDBOX_LIQUIDATION_SENDER } from '../../shared/domain/liquidation-transfers.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-f]{64}$/;

/** The off-ramps of a liquidation address, from the database (the API lists transactions, not by this id). */
async function offrampsOf(liquidationAddressId: string): Promise<string[]> {
  const rows: { id: string }[] = await (await getDs()).query(`SELECT id FROM transactions WHERE liquidation_address_id = $1 ORDER BY created_at`, [liquidationAddressId]);
  return rows.map((r) => r.id);
}

describe('liquidation addresses (sandbox)', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let beneficiary: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
    beneficiary = await kesBeneficiary(api, key);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const create = (body: Record<string, unknown>, k = key) => api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(k)).send(body);
  const transfer = (id: string, amount: string) => api.http.post(`${BASE}/sandbox/liquidation-addresses/${id}/transfer`).set(writeHeaders(key)).send({ amount });
  const getTx = async (id: string) => (await api.http.get(`${BASE}/transactions/${id}`).set(bearer(key))).body;
  async function newAddress(body: Record<string, unknown> = {}) {
    const res = await create({ chain: 'base', beneficiary_id: beneficiary, ...body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body;
  }
  /** The one off-ramp the address's next transfer becomes, once it reached one of `statuses`. */
  async function offrampReaching(addressId: string, count: number, statuses: string[]): Promise<Record<string, any>> {
    let last: Record<string, any> = {};
    return until(async () => {
      const ids = await offrampsOf(addressId);
      if (ids.length < count) return false;
      last = await getTx(ids[count - 1]);
      return statuses.includes(last.status) && last;
    }, { what: `off-ramp ${count} of ${addressId} reaching ${statuses.join('/')}`, describe: () => ({ status: last.status, failure: last.failure }) });
  }

  it('creates a permanent HD-derived address; GET answers it; a replayed create creates nothing more', async () => {
    const customer = await createCustomer(api, key);
    const idem = randomUUID();
    const body = { chain: 'base', beneficiary_id: beneficiary, customer_id: customer.id, external_reference: 'payroll-amina' };
    const res = await api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(key, idem)).send(body);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.include({ chain: 'base', asset: 'USDC', beneficiary_id: beneficiary, customer_id: customer.id, external_reference: 'payroll-amina', status: 'active' });
    expect(res.body.address).to.match(ADDRESS).and.equal(getAddress(res.body.address));
    expect(Object.keys(res.body).sort()).to.deep.equal(['address', 'asset', 'beneficiary_id', 'chain', 'created_at', 'customer_id', 'external_reference', 'id', 'status', 'updated_at']);
    const replay = await api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(key, idem)).send(body);
    expect(replay.status).to.equal(201);
    expect(replay.body.id).to.equal(res.body.id);
    const got = await api.http.get(`${BASE}/liquidation-addresses/${res.body.id}`).set(bearer(key));
    expect(got.status).to.equal(200);
    expect(got.body).to.deep.equal(res.body);
    // Each address is its own: a second one for the same beneficiary has another address.
    expect((await newAddress()).address).to.not.equal(res.body.address);
    // Another business cannot see it.
    const other = (await makeKey((await makeBusiness()).businessId)).key;
    expect((await api.http.get(`${BASE}/liquidation-addresses/${res.body.id}`).set(bearer(other))).status).to.equal(404);
  });

  it('a transfer becomes an off-ramp priced then: fees from what arrived, funded -> processing -> completed with its events', async () => {
    const address = await newAddress();
    const accepted = await transfer(address.id, '100');
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(202);
    expect(accepted.body.id).to.equal(address.id);
    const tx = await offrampReaching(address.id, 1, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(tx).to.include({ direction: 'offramp', beneficiary_id: beneficiary, liquidation_address_id: address.id, wallet_id: null });
    expect(tx.funding_source).to.deep.equal({ type: 'liquidation_address', reference: address.id, address: address.address });
    expect(tx.source.total_required).to.equal('100.000000');
    // Priced at that moment from what arrived: the largest payout whose total, fees included, is 100 USDC.
    const priced = priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', total_budget: '100', rate: tx.exchange_rate, platform_fee: DEFAULT_PLATFORM_FEE });
    expect(tx.source.amount).to.equal(priced.source.amount);
    expect(tx.destination.amount).to.equal(priced.destination.amount);
    expect({ provider: tx.fees.provider, platform: tx.fees.platform }).to.deep.equal({ provider: priced.fees.provider, platform: priced.fees.platform });
    expect(toMinor(tx.source.amount, USDC_SCALE) + toMinor(tx.fees.provider, USDC_SCALE) + toMinor(tx.fees.platform, USDC_SCALE)).to.equal(toMinor('100', USDC_SCALE));
    expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const events = await (await getDs()).query(`SELECT type FROM events WHERE data->>'id' = $1 ORDER BY seq`, [tx.id]);
    expect(events.map((e: { type: string }) => e.type)).to.include.members(['transaction.funded', 'transaction.processing', 'transaction.completed']);
    // Its settlement is the transfer into the liquidation address, from the fixed sandbox sender.
    const settlement = (await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body;
    expect(settlement).to.include({ to_address: address.address, from_address: SANDBOX_LIQUIDATION_SENDER, received_amount: '100.000000', total_required: '100.000000', status: 'confirmed' });
    expect(settlement.transaction_hash).to.match(HASH);
    // A second transfer to the same address is a second off-ramp.
    await transfer(address.id, '50');
    const second = await offrampReaching(address.id, 2, ['completed', 'failed', 'action_required']);
    expect(second).to.include({ status: 'completed', liquidation_address_id: address.id });
    expect(second.source.total_required).to.equal('50.000000');
  });

  it('takes exactly what arrived: no dust returned after completion (37 USDC, where a quote\'s total comes to 36.999998)', async () => {
    const address = await newAddress();
    await transfer(address.id, '37');
    const tx = await offrampReaching(address.id, 1, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(tx.source.total_required).to.equal('37.000000');
    const parts = [tx.source.amount, tx.fees.provider, tx.fees.platform].map((a: string) => toMinor(a, USDC_SCALE));
    expect(parts.reduce((a, b) => a + b, 0n)).to.equal(toMinor('37', USDC_SCALE));
    // The fees of the largest payout a quote's total fits; the 0.000002 it left over is converted, not returned.
    const quoted = priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', total_budget: '37', rate: tx.exchange_rate, platform_fee: DEFAULT_PLATFORM_FEE });
    expect(quoted.source.total_required).to.equal('36.999998');
    expect({ provider: tx.fees.provider, platform: tx.fees.platform }).to.deep.equal({ provider: quoted.fees.provider, platform: quoted.fees.platform });
    expect(tx.source.amount).to.equal('36.453202');
    expect(tx.destination.amount).to.equal('4715.22');
    // Nothing is owed back: no refund, none due, nothing overpaid, no refund entry in the ledger.
    expect(tx.refund).to.equal(null);
    const [row]: { refund_due_at: Date | null }[] = await (await getDs()).query(`SELECT refund_due_at FROM transactions WHERE id = $1`, [tx.id]);
    expect(row.refund_due_at).to.equal(null);
    const settlement = (await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body;
    expect(settlement).to.include({ received_amount: '37.000000', total_required: '37.000000', overpaid_amount: null });
    const refunds = await (await getDs()).query(`SELECT 1 FROM journal_entries WHERE kind = 'offramp_refund' AND metadata->>'settlement_id' = $1`, [settlement.id]);
    expect(refunds).to.have.length(0);
  });

  it('a transfer whose payout falls outside the corridor\'s limits goes back to the sender (failed, refund)', async () => {
    const address = await newAddress();
    await transfer(address.id, '5000'); // 5000 USDC is far above the 250000 KES M-Pesa limit
    const tx = await offrampReaching(address.id, 1, ['failed', 'completed']);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('amount_out_of_range');
    expect(tx.failure.details).to.include({ currency: 'KES', max_amount: '250000.00' });
    expect(tx.source.total_required).to.equal('5000.000000');
    expect(tx.refund).to.deep.include({ status: 'completed', amount: '5000.000000', to_address: SANDBOX_LIQUIDATION_SENDER });
    expect(tx.refund.transaction_hash).to.match(HASH);
    expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'failed']);
    // Too little to pay anything out: returned as well.
    await transfer(address.id, '0.05');
    const small = await offrampReaching(address.id, 2, ['failed', 'completed']);
    expect(small).to.deep.include({ status: 'failed' });
    expect(small.failure.code).to.equal('amount_out_of_range');
    expect(small.refund).to.include({ amount: '0.050000', to_address: SANDBOX_LIQUIDATION_SENDER });
  });

  it('archive answers 200 archived; a transfer after it is returned to the sender; archiving again changes nothing', async () => {
    const address = await newAddress();
    const archived = await api.http.post(`${BASE}/liquidation-addresses/${address.id}/archive`).set(writeHeaders(key));
    expect(archived.status, JSON.stringify(archived.body)).to.equal(200);
    expect(archived.body).to.include({ id: address.id, status: 'archived', address: address.address });
    const again = await api.http.post(`${BASE}/liquidation-addresses/${address.id}/archive`).set(writeHeaders(key));
    expect(again.status).to.equal(200);
    expect(again.body.status).to.equal('archived');
    // The control still plays a transfer to it (CONTRACT 9): the transfer is returned.
    const accepted = await transfer(address.id, '20');
    expect(accepted.status).to.equal(202);
    const tx = await offrampReaching(address.id, 1, ['failed', 'completed']);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('liquidation_address_archived');
    expect(tx.refund).to.deep.include({ status: 'completed', amount: '20.000000', to_address: SANDBOX_LIQUIDATION_SENDER });
    expect(tx.destination.amount).to.equal('0.00');
  });

  it('lists newest first, filtered by beneficiary_id and status, paginated', async () => {
    const own = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
    const b1 = await kesBeneficiary(api, own);
    const b2 = await kesBeneficiary(api, own, '+254722480199');
    const made: string[] = [];
    for (const b of [b1, b2, b1]) {
      const res = await create({ chain: 'base', beneficiary_id: b }, own);
      expect(res.status).to.equal(201);
      made.push(res.body.id);
    }
    await api.http.post(`${BASE}/liquidation-addresses/${made[0]}/archive`).set(writeHeaders(own));
    const list = async (query: string) => {
      const res = await api.http.get(`${BASE}/liquidation-addresses${query}`).set(bearer(own));
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body;
    };
    expect((await list('')).data.map((a: { id: string }) => a.id)).to.deep.equal([...made].reverse());
    expect((await list(`?beneficiary_id=${b1}`)).data.map((a: { id: string }) => a.id)).to.deep.equal([made[2], made[0]]);
    expect((await list('?status=archived')).data.map((a: { id: string }) => a.id)).to.deep.equal([made[0]]);
    expect((await list(`?status=active&beneficiary_id=${b1}`)).data.map((a: { id: string }) => a.id)).to.deep.equal([made[2]]);
    const first = await list('?limit=2');
    expect(first.has_more).to.equal(true);
    const rest = await list(`?limit=2&starting_after=${first.next_cursor}`);
    expect(rest.data.map((a: { id: string }) => a.id)).to.deep.equal([made[0]]);
    expect(rest.has_more).to.equal(false);
    // A bad filter is 400, never a 500.
    expect((await api.http.get(`${BASE}/liquidation-addresses?status=closed`).set(bearer(own))).status).to.equal(400);
    expect((await api.http.get(`${BASE}/liquidation-addresses?beneficiary_id=nope`).set(bearer(own))).status).to.equal(400);
  });

  it('refuses bad input with a clear error in the envelope', async () => {
    const expectError = async (res: { status: number; body: any }, status: number, code: string) => {
      expect(res.status, JSON.stringify(res.body)).to.equal(status);
      expect(res.body.error.code).to.equal(code);
      expect(res.body.error.message).to.be.a('string').and.not.equal('');
    };
    await expectError(await create({ beneficiary_id: beneficiary }), 400, 'invalid_request');
    await expectError(await create({ chain: 'solana', beneficiary_id: beneficiary }), 400, 'invalid_request');
    await expectError(await create({ chain: 'base', beneficiary_id: beneficiary, asset: 'USDT' }), 400, 'invalid_request');
    await expectError(await create({ chain: 'base', beneficiary_id: 'not-a-uuid' }), 400, 'invalid_request');
    await expectError(await create({ chain: 'base', beneficiary_id: randomUUID() }), 404, 'not_found');
    await expectError(await create({ chain: 'base', beneficiary_id: beneficiary, customer_id: randomUUID() }), 404, 'not_found');
    // An archived beneficiary cannot get a new address.
    const gone = await kesBeneficiary(api, key, '+254722480177');
    await api.http.delete(`${BASE}/beneficiaries/${gone}`).set(writeHeaders(key));
    await expectError(await create({ chain: 'base', beneficiary_id: gone }), 409, 'resource_archived');
    await expectError(await api.http.get(`${BASE}/liquidation-addresses/${randomUUID()}`).set(bearer(key)), 404, 'not_found');
    await expectError(await api.http.post(`${BASE}/liquidation-addresses/${randomUUID()}/archive`).set(writeHeaders(key)), 404, 'not_found');
    const address = await newAddress();
    await expectError(await transfer(address.id, '0'), 400, 'invalid_request');
    await expectError(await transfer(address.id, '1.0000001'), 400, 'invalid_request');
    await expectError(await api.http.post(`${BASE}/sandbox/liquidation-addresses/${address.id}/transfer`).set(writeHeaders(key)).send({}), 400, 'invalid_request');
    await expectError(await transfer(randomUUID(), '1'), 404, 'not_found');
    // A key without the scope: 403.
    const readOnly = (await makeKey((await makeBusiness()).businessId, { scopes: ['liquidation_addresses:read'] })).key;
    await expectError(await create({ chain: 'base', beneficiary_id: beneficiary }, readOnly), 403, 'insufficient_scope');
    expect((await api.http.get(`${BASE}/liquidation-addresses`).set(bearer(readOnly))).status).to.equal(200);
  });
});

describe('liquidation addresses on a live chain (Anvil)', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  before(async () => {
    rail = await startLiveChainRail({ pools: ['pricing', 'settlement', 'providers'], env: { CONFIRMATIONS_BASE: '2', CHAIN_RECONCILE_MS: '3600000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const mine = () => rail.anvil.publicClient.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
  const usdcOf = (address: string) => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });

  it('a real transfer to the address is seen by the chain watcher, confirmed, paid out through Daraja, and the address swept', async () => {
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: '+254712345066', mobile_network: 'safaricom' });
    const res = await rail.api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(rail.key)).send({ chain: 'base', beneficiary_id: beneficiaryId });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const address = res.body;
    const pk = generatePrivateKey();
    const sender = privateKeyToAccount(pk).address as Address;
    await mintUsdc(rail.anvil, rail.token, sender, toMinor('30', USDC_SCALE));
    await rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [sender, `0x${parseEther('1').toString(16)}`] as never });
    const hash = await transferUsdcFrom(rail, pk, address.address, toMinor('30', USDC_SCALE));
    const tx = await liveOfframpEnding(address.id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(tx.funding_source).to.deep.equal({ type: 'liquidation_address', reference: address.id, address: address.address });
    expect(tx.source.total_required).to.equal('30.000000');
    expect(tx.provider_reference).to.be.a('string');
    expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const settlement = (await rail.api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(rail.key))).body;
    expect(settlement).to.include({ transaction_hash: hash, from_address: sender, to_address: address.address, received_amount: '30.000000' });
    // The address's USDC is swept to the hot wallet, signed with the address's own HD key.
    await until(async () => (await usdcOf(address.address)) === 0n, { what: 'the liquidation address swept', timeoutMs: 20_000 });
    const [sweep]: { status: string; amount: string; to_address: string }[] = await (await getDs()).query(
      `SELECT status, amount::text, to_address FROM chain_sends WHERE purpose = 'sweep' AND from_address = $1`, [address.address.toLowerCase()]);
    expect(sweep).to.deep.include({ status: 'mined', amount: toMinor('30', USDC_SCALE).toString(), to_address: rail.hot.toLowerCase() });
  });
  it('live creation refuses a beneficiary whose corridor has no live provider: 422 unsupported_corridor, no_live_provider', async () => {
    // KES by bank transfer is served in sandbox only: no live provider pays it.
    const bank = await rail.api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(rail.key))
      .send({ currency: 'KES', payment_method: 'bank_transfer', account_holder_name: 'Amina W', details: { bank_code: '01', account_number: '0123456789' } });
    expect(bank.status, JSON.stringify(bank.body)).to.equal(201);
    const before = await (await getDs()).query(`SELECT count(*)::int AS n FROM liquidation_addresses WHERE beneficiary_id = $1`, [bank.body.id]);
    const res = await rail.api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(rail.key)).send({ chain: 'base', beneficiary_id: bank.body.id });
    expect(res.status, JSON.stringify(res.body)).to.equal(422);
    expect(res.body.error.code).to.equal('unsupported_corridor');
    expect(res.body.error.details).to.include({ reason: 'no_live_provider' });
    expect(await (await getDs()).query(`SELECT count(*)::int AS n FROM liquidation_addresses WHERE beneficiary_id = $1`, [bank.body.id])).to.deep.equal(before);
  });

  /** A live address for a new M-Pesa beneficiary and a funded sender; `send` transfers `amount` USDC to it. */
  async function liveAddressAndSender(phone: string, amount: string) {
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: phone, mobile_network: 'safaricom' });
    const res = await rail.api.http.post(`${BASE}/liquidation-addresses`).set(writeHeaders(rail.key)).send({ chain: 'base', beneficiary_id: beneficiaryId });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const pk = generatePrivateKey();
    const sender = privateKeyToAccount(pk).address as Address;
    await mintUsdc(rail.anvil, rail.token, sender, toMinor(amount, USDC_SCALE));
    await rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [sender, `0x${parseEther('1').toString(16)}`] as never });
    return { address: res.body, sender, send: () => transferUsdcFrom(rail, pk, res.body.address, toMinor(amount, USDC_SCALE)) };
  }
  /** The rate source answers with a rate too old to price with, once any fresh one cached (at most 5 s) is gone. */
  async function staleRates() {
    rail.rates.ageMs = 10 * 60_000;
    await new Promise((r) => setTimeout(r, 5_100));
  }
  const transferRow = async (addressId: string) => (await (await getDs()).query(
    `SELECT id, transaction_id FROM liquidation_transfers WHERE liquidation_address_id = $1`, [addressId])) as { id: string; transaction_id: string | null }[];
  async function liveOfframpEnding(addressId: string, statuses: string[], timeoutMs = 40_000): Promise<Record<string, any>> {
    let last: Record<string, any> = {};
    return until(async () => {
      await mine();
      const ids = await offrampsOf(addressId);
      if (!ids.length) return false;
      last = (await rail.api.http.get(`${BASE}/transactions/${ids[0]}`).set(bearer(rail.key))).body;
      return statuses.includes(last.status) && last;
    }, { what: `the live liquidation off-ramp reaching ${statuses.join('/')}`, describe: () => ({ status: last.status, failure: last.failure, refund: last.refund }), timeoutMs, everyMs: 150 });
  }

  it('a transfer that finds no fresh rate waits, past the job\'s attempts, and is priced and paid once the rate returns', async () => {
    const { address, send } = await liveAddressAndSender('+254712345067', '25');
    await staleRates();
    try {
      await send();
      await until(async () => (await transferRow(address.id)).length === 1, { what: 'the transfer recorded', timeoutMs: 20_000 });
      // Longer than the job's five attempts with backoff (about 7.5 s): still waiting, unpriced, nothing returned.
      await new Promise((r) => setTimeout(r, 9_000));
      expect((await transferRow(address.id))[0].transaction_id).to.equal(null);
      expect(await offrampsOf(address.id)).to.deep.equal([]);
    } finally {
      rail.rates.ageMs = 1000;
    }
    // Priced at the returned rate and paid out (the payout's own fate is the Daraja tests' concern).
    const tx = await liveOfframpEnding(address.id, ['processing', 'completed', 'failed', 'action_required']);
    expect(tx.source.total_required).to.equal('25.000000');
    expect(tx.exchange_rate).to.equal('129.35');
    expect(tx.failure?.code).to.not.equal('rate_unavailable');
    expect((await history(tx.id)).slice(0, 4)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing']);
  });

  it('a transfer still unpriced AUTO_REFUND_AFTER_SECONDS after it arrived goes back to its sender (failed, rate_unavailable, refund)', async () => {
    const { address, sender, send } = await liveAddressAndSender('+254712345068', '15');
    await staleRates();
    try {
      await send();
      await until(async () => (await transferRow(address.id)).length === 1, { what: 'the transfer recorded', timeoutMs: 20_000 });
      expect(await usdcOf(sender)).to.equal(0n);
      // Its deadline (AUTO_REFUND_AFTER_SECONDS, 900 s by default) passes: it was recorded long enough ago.
      await (await getDs()).query(`UPDATE liquidation_transfers SET created_at = now() - interval '901 seconds' WHERE liquidation_address_id = $1`, [address.id]);
      const tx = await liveOfframpEnding(address.id, ['failed', 'completed']);
      expect(tx.status).to.equal('failed');
      expect(tx.failure.code).to.equal('rate_unavailable');
      expect(tx.source.total_required).to.equal('15.000000');
      expect(tx.destination.amount).to.equal('0.00');
      expect(tx.refund).to.deep.include({ amount: '15.000000', to_address: sender });
      expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'failed']);
      // The USDC is back with the sender.
      await until(async () => (await usdcOf(sender)) === toMinor('15', USDC_SCALE), { what: 'the sender repaid', timeoutMs: 20_000 });
    } finally {
      rail.rates.ageMs = 1000;
    }
  });
});
