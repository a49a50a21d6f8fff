// Refunds on a real chain (Anvil playing base): each return leaves the treasury hot wallet as one send, recorded
// before it is broadcast (chain_sends, one reference per amount), and completes with its hash once mined.
import { expect } from 'chai';
import { erc20Abi, getAddress, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { liveExternalOfframp, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { fromMinor, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { expireSettlementJob } from '../../workers/settlement/expire-settlement.job.js';

const minor = (v: string) => toMinor(v, USDC_SCALE);
const usdc = (v: bigint) => fromMinor(v, USDC_SCALE);

describe('refunds on Anvil: one hot-wallet send per return', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;

  before(async () => {
    rail = await startLiveChainRail({ pools: ['pricing', 'settlement', 'providers'], env: { CONFIRMATIONS_BASE: '1', CHAIN_RECONCILE_MS: '3600000', AUTO_REFUND_AFTER_SECONDS: '1' } });
    // The watcher scans a chain while one of its deposit addresses is open; this one stays open, so transfers to
    // closed addresses (late deposits, excesses) are seen as they would be on a busy chain.
    await liveExternalOfframp(rail, '+254712341000');
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const usdcOf = (address: string) => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });
  const get = async (id: string) => (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
  const counted = (id: string, amount: string) =>
    until(async () => (await rail.api.http.get(`${BASE}/transactions/${id}/settlement`).set(bearer(rail.key))).body.received_amount === amount, { what: `${amount} counted` });
  const untilRefunded = (id: string, amount: string) => until(async () => {
    const tx = await get(id);
    return tx.refund?.status === 'completed' && tx.refund.amount === amount && tx;
  }, { what: `a refund of ${amount} completed`, timeoutMs: 30_000 });
  const expireNow = async (id: string) => {
    await (await getDs()).query(`UPDATE settlements SET expires_at = now() - interval '1 second' WHERE transaction_id = $1`, [id]);
    await expireSettlementJob.process({ data: { transactionId: id } } as never, rail.pools.deps);
  };
  const sendsTo = async (address: string) =>
    (await (await getDs()).query(`SELECT reference, amount::text, status FROM chain_sends WHERE purpose = 'refund' AND to_address = $1 ORDER BY created_at`, [address.toLowerCase()])) as
      { reference: string; amount: string; status: string }[];

  it('underpaid, refunded on request to the refund_address named at creation: pending, then mined from the hot wallet', async () => {
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address as Address;
    const { account, created } = await liveExternalOfframp(rail, '+254712341010', 0n, { refund_address: elsewhere });
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, minor('7'));
    await counted(created.id, '7.000000');
    await expireNow(created.id);
    expect((await get(created.id)).failure.code).to.equal('underpaid');
    const res = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({});
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body).to.deep.include({ status: 'failed' });
    expect(res.body.refund).to.deep.equal({ status: 'pending', amount: '7.000000', to_address: elsewhere, transaction_hash: null });
    const done = await untilRefunded(created.id, '7.000000');
    const receipt = await rail.anvil.publicClient.getTransactionReceipt({ hash: done.refund.transaction_hash });
    expect(receipt.from.toLowerCase()).to.equal(rail.hot.toLowerCase());
    expect(await usdcOf(elsewhere)).to.equal(minor('7'));
    expect(await sendsTo(elsewhere)).to.deep.equal([{ reference: `refund-${created.id}-${minor('7')}`, amount: minor('7').toString(), status: 'mined' }]);
  });

  it('an overpayment\'s excess goes back on chain once the payout completes; a late deposit is refunded on its own: one send per amount', async () => {
    const { account, created, total } = await liveExternalOfframp(rail, '+254712341020', minor('8'));
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, total + minor('3'));
    const excess = await untilRefunded(created.id, '3.000000');
    expect(excess.status).to.equal('completed');
    expect(excess.refund.to_address).to.equal(account.address);
    expect(await usdcOf(account.address)).to.equal(minor('8'));
    // After completion, the settlement closed: another transfer is an excess too, returned on its own.
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, minor('2'));
    const again = await untilRefunded(created.id, '5.000000');
    expect(again.status).to.equal('completed');
    expect(await usdcOf(account.address)).to.equal(minor('8'));
    // Swept with the payment or returned from the hot wallet after its sweep: the deposit address keeps nothing.
    expect(await usdcOf(created.settlement.to_address)).to.equal(0n);
    expect((await sendsTo(account.address)).map((s) => [s.amount, s.status])).to.deep.equal([[minor('3').toString(), 'mined'], [minor('2').toString(), 'mined']]);
  });

  it('a late deposit on an expired off-ramp is returned to from_address after AUTO_REFUND_AFTER_SECONDS, its failure code kept', async () => {
    const { account, created, total } = await liveExternalOfframp(rail, '+254712341030');
    await expireNow(created.id);
    expect((await get(created.id)).status).to.equal('failed');
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, total);
    await untilStatus(rail.api, rail.key, created.id, ['action_required']);
    const done = await untilRefunded(created.id, usdc(total));
    expect(done).to.deep.include({ status: 'failed' });
    expect(done.failure.code).to.equal('late_deposit');
    expect(await usdcOf(account.address)).to.equal(total);
    expect(await sendsTo(account.address)).to.have.length(1);
    expect(await usdcOf(created.settlement.to_address)).to.equal(0n);
  });
});
