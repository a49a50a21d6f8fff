// Refunds on a real chain (Anvil playing base): each return leaves the treasury hot wallet as one send, recorded
// before it is broadcast (chain_sends, one reference per amount), and completes with its hash once mined. CONTRACT
// section 18: USDC that arrived at a deposit address leaves it (the address is swept to the hot wallet before the hot
// wallet returns it, so the hot wallet's own USDC is never spent), the reconciliation reads every deposit address, and
// a refund the chain refuses is due again: refund.amount counts only completed sends, POST /refund sends it again (to
// a new address if given), and the sweeper tries a failed automatic refund again.
import { expect } from 'chai';
import { encodeAbiParameters, erc20Abi, getAddress, keccak256, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { contracts } from '../helpers/chain.js';
import { liveExternalOfframp, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { fromMinor, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { expireSettlementJob } from '../../workers/settlement/expire-settlement.job.js';
import { reconcileChain } from '../../shared/chain/reconcile.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';

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
  const untilRefund = (id: string, status: string, amount: string) => until(async () => {
    const tx = await get(id);
    return tx.refund?.status === status && tx.refund.amount === amount && tx;
  }, { what: `a refund ${status} at ${amount}`, timeoutMs: 30_000 });
  const untilRefunded = (id: string, amount: string) => untilRefund(id, 'completed', amount);
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

  const refundSendsTo = async (address: string) =>
    ((await (await getDs()).query(`SELECT reference, status FROM chain_sends WHERE purpose = 'refund' AND to_address = $1 ORDER BY id`, [address.toLowerCase()])) as { reference: string; status: string }[]);
  const blacklist = async (address: Address, on: boolean) => {
    const hash = await rail.anvil.walletClient.writeContract({
      address: rail.token, abi: contracts().TestUSDC.abi, functionName: on ? 'blacklist' : 'unBlacklist', args: [address], account: rail.anvil.deployer, chain: rail.anvil.chain,
    });
    await rail.anvil.publicClient.waitForTransactionReceipt({ hash });
  };
  const reconcile = async () => {
    const result = await reconcileChain({ ds: await getDs(), config: rail.pools.deps.config, log: rail.pools.deps.log }, 'live', 'base');
    if (result === 'not configured') throw new Error('reconciliation not configured');
    return result;
  };
  // The business asks before AUTO_REFUND_AFTER_SECONDS (1 s here) is up, however slow the machine.
  const holdAutoRefund = async (id: string) => (await getDs()).query(`UPDATE transactions SET refund_due_at = now() + interval '1 hour' WHERE id = $1`, [id]);
  const underpaid = async (phone: string, body: Record<string, unknown> = {}) => {
    const made = await liveExternalOfframp(rail, phone, 0n, body);
    await transferUsdcFrom(rail, made.account.key, made.created.settlement.to_address, minor('7'));
    await counted(made.created.id, '7.000000');
    return made;
  };

  it('an underpaid off-ramp refunded: its deposit address ends with 0 USDC and the hot wallet\'s USDC is unchanged by the refund; the reconciliation reads the address', async () => {
    const { created, account, total } = await underpaid('+254712342010');
    const deposit = created.settlement.to_address;
    await expireNow(created.id);
    await holdAutoRefund(created.id);
    expect((await get(created.id)).failure.code).to.equal('underpaid');
    const hotBefore = await usdcOf(rail.hot);
    const res = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({});
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    await untilRefund(created.id, 'completed', '7.000000');
    expect(await usdcOf(account.address)).to.equal(total);
    expect(await usdcOf(deposit)).to.equal(0n);
    expect(await usdcOf(rail.hot)).to.equal(hotBefore);
    const of = (result: Awaited<ReturnType<typeof reconcile>>) => result.find((d) => d.address.toLowerCase() === deposit.toLowerCase());
    expect(of(await reconcile())).to.deep.include({ kind: 'deposit_address', chain_balance: 0n, ledger_balance: 0n, drift: 0n });
    // USDC at the address that no record explains (written straight into the token's balance slot, no Transfer log):
    // a mismatch on that address.
    const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [getAddress(deposit), 1n]));
    await rail.anvil.publicClient.request({ method: 'anvil_setStorageAt' as never, params: [rail.token, slot, `0x${minor('5').toString(16).padStart(64, '0')}`] as never });
    expect(of(await reconcile())).to.deep.include({ kind: 'deposit_address', chain_balance: minor('5'), ledger_balance: 0n, drift: minor('5') });
    await rail.anvil.publicClient.request({ method: 'anvil_setStorageAt' as never, params: [rail.token, slot, `0x${'0'.repeat(64)}`] as never });
  });

  it('a refund the chain refuses counts nothing as returned; POST /refund with a new refund_address sends it again and completes', async () => {
    const blocked = privateKeyToAccount(generatePrivateKey()).address;
    await blacklist(blocked, true);
    const { created } = await underpaid('+254712342020', { refund_address: blocked });
    await expireNow(created.id);
    await holdAutoRefund(created.id);
    const hotBefore = await usdcOf(rail.hot);
    const first = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({});
    expect(first.status, JSON.stringify(first.body)).to.equal(202);
    const failed = await untilRefund(created.id, 'failed', '0.000000');
    expect(failed).to.deep.include({ status: 'failed' });
    expect(await refundSendsTo(blocked)).to.deep.equal([{ reference: `refund-${created.id}-${minor('7')}`, status: 'reverted' }]);
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
    const again = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({ refund_address: elsewhere });
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    expect(again.body.refund).to.deep.include({ status: 'pending', amount: '7.000000', to_address: elsewhere });
    const done = await untilRefund(created.id, 'completed', '7.000000');
    expect(done.refund.to_address).to.equal(elsewhere);
    expect(await usdcOf(elsewhere)).to.equal(minor('7'));
    expect(await usdcOf(created.settlement.to_address)).to.equal(0n);
    expect(await usdcOf(rail.hot)).to.equal(hotBefore);
    expect(await refundSendsTo(elsewhere)).to.deep.equal([{ reference: `refund-${created.id}-${minor('7')}-2`, status: 'mined' }]);
    // Everything went back: nothing is left to refund.
    const none = await rail.api.http.post(`${BASE}/transactions/${created.id}/refund`).set(writeHeaders(rail.key)).send({});
    expect(none.status).to.equal(409);
    expect(none.body.error.details.reason).to.equal('nothing_to_refund');
  });

  it('an automatic refund the chain refuses is due again: the sweeper tries it again after its backoff, until it completes', async () => {
    const blocked = privateKeyToAccount(generatePrivateKey()).address;
    await blacklist(blocked, true);
    const { created } = await underpaid('+254712342030', { refund_address: blocked });
    // Underpaid, refunded on its own after AUTO_REFUND_AFTER_SECONDS: the send reverts.
    await expireNow(created.id);
    const failed = await untilRefund(created.id, 'failed', '0.000000');
    expect(failed.failure.code).to.equal('underpaid');
    const ds = await getDs();
    const [{ due }]: { due: Date | null }[] = await ds.query(`SELECT refund_due_at AS due FROM transactions WHERE id = $1`, [created.id]);
    expect(due, 'the retry is scheduled').to.be.instanceOf(Date);
    expect(due!.getTime()).to.be.greaterThan(Date.now());
    // Once the address can receive again and the backoff has passed, the sweeper's rule sends it again.
    await blacklist(blocked, false);
    await ds.query(`UPDATE transactions SET refund_due_at = now() - interval '1 minute' WHERE id = $1`, [created.id]);
    const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    expect(counts['off-ramp refunds past their due time']).to.be.greaterThan(0);
    const done = await untilRefund(created.id, 'completed', '7.000000');
    expect(done).to.deep.include({ status: 'failed' });
    expect(done.failure.code).to.equal('underpaid');
    expect(await usdcOf(blocked)).to.equal(minor('7'));
    expect(await usdcOf(created.settlement.to_address)).to.equal(0n);
    expect((await refundSendsTo(blocked)).map((s) => s.status)).to.deep.equal(['reverted', 'mined']);
  });
});
