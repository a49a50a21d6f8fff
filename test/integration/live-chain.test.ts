import { expect } from 'chai';
import { erc20Abi, getAddress, parseEther, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { expectLedgerSound, history, offramp, quote, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { contracts, mintUsdc, type Anvil } from '../helpers/chain.js';
import { fundedLiveWallet, liveBeneficiary, liveExternalOfframp, liveOnramp, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { send, settle } from '../../shared/chain/sender.js';
import { inProcessSigner, type TransactionSigner } from '../../shared/chain/signer.js';
import { getConfig } from '../../shared/config.js';
import { managedWalletAccount } from '../../shared/chain/hd-wallet.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { reconcileChain } from '../../shared/chain/reconcile.js';
import { reconcileChainJob } from '../../workers/settlement/reconcile-chain.job.js';
import { registry as metrics } from '../../shared/metrics.js';

// The live chain rails end to end on a real Anvil playing base (chain id 8453) with a 6-decimal USDC deployed by the
// test: the settlement watcher, confirmations from the head, the managed wallet's signed transfers with their nonces
// and gas top-ups, the hot wallet's deliveries and refunds, sweeps, reorgs and the reconciliation. The fiat side is
// our fake Daraja (test/helpers/fake-daraja.ts), as in the live M-Pesa tests.

const CONFIRMATIONS = 3;
const minor = (v: string) => toMinor(v, USDC_SCALE);

describe('live chain rails on Anvil', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  let anvil: Anvil;
  let token: Address;
  let hot: Address;

  before(async () => {
    rail = await startLiveChainRail({
      pools: ['pricing', 'settlement', 'providers'], env: { CONFIRMATIONS_BASE: String(CONFIRMATIONS), CHAIN_RECONCILE_MS: '3600000' },
    });
    ({ anvil, token, hot } = rail);
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const mine = (n = 1) => anvil.publicClient.request({ method: 'anvil_mine' as never, params: [`0x${n.toString(16)}`] as never });
  function setEth(address: Address, wei: bigint) {
    return anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [address, `0x${wei.toString(16)}`] as never });
  }
  const usdcOf = (address: string) => anvil.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });
  const key = () => rail.key;
  const api = () => rail.api;

  /** Mines a block every 100 ms until the transaction reaches one of `statuses` (confirmations come from the head). */
  async function mineUntil(id: string, statuses: string[]): Promise<Record<string, any>> {
    let last: Record<string, any> = {};
    return until(async () => {
      await mine();
      last = (await api().http.get(`${BASE}/transactions/${id}`).set(bearer(key()))).body;
      return statuses.includes(last.status) && last;
    }, { what: `transaction ${id} reaching ${statuses.join('/')}`, describe: () => ({ status: last.status, failure: last.failure }), timeoutMs: 30_000, everyMs: 100 });
  }

  const transferFrom = (privateKey: Hex, to: string, amount: bigint) => transferUsdcFrom(rail, privateKey, to, amount);

  it('an external wallet\'s off-ramp: the transfer is detected, confirmed from the head, paid out, and the deposit swept to the hot wallet', async () => {
    const { account, created, total } = await externalOfframp('+254712345010');
    const settlement = created.settlement;
    // Blocks only when the test mines them: the transfer's block is the head, one confirmation, and it stays there.
    await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    let hash: Hex;
    let seen: Record<string, any>;
    try {
      hash = await anvil.walletClient.writeContract({
        address: token, abi: erc20Abi, functionName: 'transfer', args: [getAddress(settlement.to_address), total], account: privateKeyToAccount(account.key), chain: anvil.chain,
      });
      await mine();
      seen = await untilStatus(api(), key(), created.id, ['awaiting_funds']);
      await new Promise((resolve) => setTimeout(resolve, 600)); // a few confirmation checks, at the same head
      const s1 = (await api().http.get(`${BASE}/transactions/${seen.id}/settlement`).set(bearer(key()))).body;
      expect(s1).to.include({ status: 'confirming', transaction_hash: hash, received_amount: settlement.total_required, confirmations: 1 });
      await mine(CONFIRMATIONS - 2);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect((await api().http.get(`${BASE}/transactions/${seen.id}`).set(bearer(key()))).body.status).to.equal('awaiting_funds');
    } finally {
      await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    }
    const done = await mineUntil(seen!.id, ['completed', 'failed', 'action_required']);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    expect(await history(seen.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    // The sweep: the deposit address is emptied into the hot wallet (its gas topped up from there first).
    await until(async () => (await usdcOf(settlement.to_address)) === 0n, { what: 'the deposit address swept' });
    // The chain has it; the send's row says mined once its receipt is read (a job of its own, a moment later).
    const sweep = await until(async () => {
      const [row]: { status: string; amount: string; to_address: string }[] = await (await getDs()).query(
        `SELECT status, amount::text, to_address FROM chain_sends WHERE purpose = 'sweep' AND from_address = $1`, [settlement.to_address.toLowerCase()]);
      return row?.status === 'mined' && row;
    }, { what: 'the sweep recorded mined' });
    expect(sweep).to.deep.include({ status: 'mined', amount: total.toString(), to_address: hot.toLowerCase() });
  });

  const externalOfframp = (phone: string, extra = 0n) => liveExternalOfframp(rail, phone, extra);

  it('a managed wallet\'s off-ramp: the service tops up its gas, signs and sends; the hash and nonce are recorded', async () => {
    const customer = await createCustomer(api(), key());
    const address = customer.wallet.address;
    await mintUsdc(anvil, token, getAddress(address), minor('50'));
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: '+254712345020', mobile_network: 'safaricom' });
    const q = await quote(api(), key(), { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
    const created = await offramp(api(), key(), q.id, customer.wallet.id);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const done = await mineUntil(created.body.id, ['completed', 'failed', 'action_required']);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    expect(await history(done.id)).to.deep.equal(['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const settlement = (await api().http.get(`${BASE}/transactions/${done.id}/settlement`).set(bearer(key()))).body;
    const submitted = settlement.execution.submitted;
    const onChain = await anvil.publicClient.getTransaction({ hash: submitted.transaction_hash });
    expect(onChain.from.toLowerCase()).to.equal(address.toLowerCase());
    expect(onChain.nonce).to.equal(submitted.nonce);
    expect(await usdcOf(address)).to.equal(minor('50') - minor(settlement.total_required));
    // Its gas came from the hot wallet: one top-up, before the transfer.
    const topups: { from_address: string }[] = await (await getDs()).query(`SELECT from_address FROM chain_sends WHERE purpose = 'gas_topup' AND to_address = $1`, [address.toLowerCase()]);
    expect(topups).to.deep.equal([{ from_address: hot.toLowerCase() }]);
  });

  /** A managed wallet of a new customer holding `usdc` on Anvil (recorded by the watcher like any outside funding). */
  async function managedWith(usdc: string) {
    const customer = await createCustomer(api(), key());
    if (usdc !== '0') await mintUsdc(anvil, token, getAddress(customer.wallet.address), minor(usdc));
    return customer.wallet;
  }

  async function managedOfframp(walletId: string, amount: string, phone: string) {
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: phone, mobile_network: 'safaricom' });
    const q = await quote(api(), key(), { direction: 'offramp', source_amount: amount, beneficiary_id: beneficiaryId });
    const created = await offramp(api(), key(), q.id, walletId);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body;
  }

  it('two off-ramps from one managed wallet at once get consecutive nonces, and both complete', async () => {
    const wallet = await managedWith('100');
    const [a, b] = await Promise.all([managedOfframp(wallet.id, '20', '+254712345031'), managedOfframp(wallet.id, '25', '+254712345032')]);
    const [da, db] = await Promise.all([mineUntil(a.id, ['completed', 'failed', 'action_required']), mineUntil(b.id, ['completed', 'failed', 'action_required'])]);
    expect([da.status, db.status], JSON.stringify([da.failure, db.failure])).to.deep.equal(['completed', 'completed']);
    const sends: { nonce: string; status: string }[] = await (await getDs()).query(
      `SELECT nonce::text, status FROM chain_sends WHERE from_address = $1 ORDER BY nonce`, [wallet.address.toLowerCase()]);
    expect(sends).to.deep.equal([{ nonce: '0', status: 'mined' }, { nonce: '1', status: 'mined' }]);
    expect(await anvil.publicClient.getTransactionCount({ address: getAddress(wallet.address) })).to.equal(2);
    const totals = [da, db].reduce((sum, t) => sum + minor(t.source.total_required), 0n);
    expect(await usdcOf(wallet.address)).to.equal(minor('100') - totals);
  });

  it('gas another send of the wallet has reserved is not counted twice: with one transfer in flight, the next is topped up first, and both are mined', async () => {
    const deps = { ds: await getDs(), config: rail.pools.deps.config, log: rail.pools.deps.log };
    const wallet = await managedWith('10');
    const [{ hd_index }]: { hd_index: number }[] = await deps.ds.query(`SELECT hd_index FROM wallets WHERE id = $1`, [wallet.id]);
    const from = getAddress(wallet.address);
    const target = privateKeyToAccount(generatePrivateKey()).address;
    const transfer = (reference: string) => send(deps, { environment: 'live', chain: 'base', reference, purpose: 'offramp_funding', signer: { kind: 'managed', index: hd_index }, to: target, asset: 'USDC', amount: minor('1') });
    const stamp = Date.now();
    await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    let mining: ReturnType<typeof setInterval> | undefined;
    try {
      // Gas for one transfer at today's fees, with room to spare, but not for two: the first one's reserve leaves too little.
      const { maxFeePerGas } = await anvil.publicClient.estimateFeesPerGas();
      await setEth(from, 100_000n * maxFeePerGas);
      const first = (await transfer(`test-flight-a-${stamp}`))!;
      expect(first.status).to.equal('sent');
      // The second: until it has recorded something (its top-up, or itself), nothing is mined, so the first is in flight.
      const second = transfer(`test-flight-b-${stamp}`);
      await until(async () => (await deps.ds.query(`SELECT 1 FROM chain_sends WHERE reference IN ($1, $2)`, [`gas-test-flight-b-${stamp}`, `test-flight-b-${stamp}`])).length > 0, { what: 'the second transfer or its top-up recorded' });
      mining = setInterval(() => void mine().catch(() => null), 150);
      const row = (await second)!;
      const [receiptA, receiptB] = await Promise.all([settle(deps, 'base', first, 15_000), settle(deps, 'base', row, 15_000)]);
      expect([receiptA.status, receiptB.status]).to.deep.equal(['success', 'success']);
      const topups: { reference: string }[] = await deps.ds.query(`SELECT reference FROM chain_sends WHERE purpose = 'gas_topup' AND to_address = $1`, [from.toLowerCase()]);
      expect(topups.map((t) => t.reference)).to.deep.equal([`gas-test-flight-b-${stamp}`]);
      expect(await usdcOf(target)).to.equal(minor('2'));
    } finally {
      clearInterval(mining);
      await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    }
  });

  it('short of USDC: action_required insufficient_funds; funded and retried, it is sent once', async () => {
    const wallet = await managedWith('5');
    const tx = await managedOfframp(wallet.id, '20', '+254712345041');
    const stalled = await untilStatus(api(), key(), tx.id, ['action_required', 'completed']);
    expect(stalled.failure.code).to.equal('insufficient_funds');
    expect(stalled.failure.details).to.include({ available: '5.000000' });
    await mintUsdc(anvil, token, getAddress(wallet.address), minor('30'));
    expect((await api().http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key()))).status).to.equal(202);
    const done = await mineUntil(tx.id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(await anvil.publicClient.getTransactionCount({ address: getAddress(wallet.address) })).to.equal(1);
  });

  it('no gas and a dry hot wallet: action_required insufficient_gas; with gas back, a retry tops it up and sends', async () => {
    const wallet = await managedWith('50');
    const hotEth = await anvil.publicClient.getBalance({ address: hot });
    await setEth(hot, 0n);
    try {
      const tx = await managedOfframp(wallet.id, '20', '+254712345051');
      const stalled = await untilStatus(api(), key(), tx.id, ['action_required', 'completed']);
      expect(stalled.failure.code).to.equal('insufficient_gas');
      expect(await anvil.publicClient.getTransactionCount({ address: getAddress(wallet.address) })).to.equal(0);
      await setEth(hot, hotEth);
      expect((await api().http.post(`${BASE}/transactions/${tx.id}/retry`).set(writeHeaders(key()))).status).to.equal(202);
      const done = await mineUntil(tx.id, ['completed', 'failed']);
      expect(done.status).to.equal('completed');
    } finally {
      await setEth(hot, hotEth > 0n ? hotEth : parseEther('10'));
    }
  });

  it('underpaid, then the remainder and more: received_amount sums the transfers, and the overpayment is reported', async () => {
    const { account, created, total } = await externalOfframp('+254712345060', minor('5'));
    await transferFrom(account.key, created.settlement.to_address, minor('10'));
    const settlementOf = async () => (await api().http.get(`${BASE}/transactions/${created.id}/settlement`).set(bearer(key()))).body;
    await until(async () => (await settlementOf()).received_amount === '10.000000', { what: 'the first transfer counted' });
    expect((await settlementOf()).status).to.equal('awaiting_transfer');
    await transferFrom(account.key, created.settlement.to_address, total - minor('10') + minor('5'));
    const done = await mineUntil(created.id, ['completed', 'failed', 'action_required']);
    expect(done.status).to.equal('completed');
    const settled = await settlementOf();
    expect(settled).to.include({ status: 'confirmed', received_amount: (await import('../../shared/domain/money.js')).fromMinor(total + minor('5'), USDC_SCALE), overpaid_amount: '5.000000' });
  });

  it('expiry: nothing received fails it; part received is underpaid; a transfer after expiry is a late deposit', async () => {
    const expireNow = async (txId: string) => {
      // Due now: the settlement pool's expiry.settlements finds it within a second.
      await (await getDs()).query(`UPDATE settlements SET expires_at = now() WHERE transaction_id = $1`, [txId]);
    };
    const { account, wallet, beneficiaryId, created: empty } = await externalOfframp('+254712345070', minor('10'));
    const part = (await offramp(api(), key(), (await quote(api(), key(), { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId })).id, wallet.id)).body;
    await transferFrom(account.key, part.settlement.to_address, minor('3'));
    await until(async () => (await api().http.get(`${BASE}/transactions/${part.id}/settlement`).set(bearer(key()))).body.received_amount === '3.000000', { what: 'the part counted' });
    await Promise.all([expireNow(empty.id), expireNow(part.id)]);
    const failed = await untilStatus(api(), key(), empty.id, ['failed']);
    expect(failed.failure.code).to.equal('settlement_expired');
    const underpaid = await untilStatus(api(), key(), part.id, ['action_required']);
    expect(underpaid.failure).to.deep.include({ code: 'underpaid' });
    // Late: a transfer to the expired, empty settlement's address is recorded and left to the business.
    await transferFrom(account.key, empty.settlement.to_address, minor('4'));
    const late = await untilStatus(api(), key(), empty.id, ['action_required']);
    expect(late.failure.code).to.equal('late_deposit');
    expect(late.failure.details.received_amount).to.equal('4.000000');
  });

  it('a reorg that removes the counted transfer rolls the settlement back; the transfer mined again completes it', async () => {
    const { account, created, total } = await externalOfframp('+254712345080');
    const snapshot = await anvil.publicClient.request({ method: 'evm_snapshot' as never });
    await transferFrom(account.key, created.settlement.to_address, total);
    await untilStatus(api(), key(), created.id, ['awaiting_funds']);
    // The block leaves the chain; the new chain grows past it without the transfer.
    await anvil.publicClient.request({ method: 'evm_revert' as never, params: [snapshot] as never });
    await mine(2);
    const rolledBack = await untilStatus(api(), key(), created.id, ['created']);
    expect(rolledBack.settlement?.status ?? (await api().http.get(`${BASE}/transactions/${created.id}/settlement`).set(bearer(key()))).body.status).to.equal('awaiting_transfer');
    const settlement = (await api().http.get(`${BASE}/transactions/${created.id}/settlement`).set(bearer(key()))).body;
    expect(settlement).to.include({ received_amount: '0.000000', transaction_hash: null, confirmations: 0 });
    const events = (await api().http.get(`${BASE}/events?type=settlement.awaiting_transfer`).set(bearer(key()))).body.data;
    expect(events.some((e: { data: { id: string } }) => e.data.id === settlement.id)).to.equal(true);
    // The payer sends again (the revert took the minted USDC too): counted anew, confirmed, paid out once.
    await mintUsdc(anvil, token, account.address, total);
    await setEth(account.address, parseEther('1'));
    await transferFrom(account.key, created.settlement.to_address, total);
    const done = await mineUntil(created.id, ['completed', 'failed', 'action_required']);
    expect(done.status).to.equal('completed');
    expect(await history(created.id)).to.deep.equal(['created', 'awaiting_funds', 'created', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('a payout refused for good refunds the external wallet on-chain from the hot wallet, once', async () => {
    const { account, created, total } = await externalOfframp('+254712340002');
    await transferFrom(account.key, created.settlement.to_address, total);
    const failed = await mineUntil(created.id, ['failed', 'completed']);
    expect(failed.status).to.equal('failed');
    const refunded = await until(async () => {
      const tx = (await api().http.get(`${BASE}/transactions/${created.id}`).set(bearer(key()))).body;
      return tx.refund?.status === 'completed' && tx;
    }, { what: 'the refund completed' });
    expect(refunded.refund.amount).to.equal(created.settlement.total_required);
    const receipt = await anvil.publicClient.getTransactionReceipt({ hash: refunded.refund.transaction_hash });
    expect(receipt.from.toLowerCase()).to.equal(hot.toLowerCase());
    expect(await usdcOf(account.address)).to.equal(total);
    const refunds: unknown[] = await (await getDs()).query(`SELECT 1 FROM chain_sends WHERE purpose = 'refund' AND to_address = $1`, [account.address.toLowerCase()]);
    expect(refunds).to.have.length(1);
  });

  it('a live on-ramp: M-Pesa collects, the hot wallet delivers the USDC, the transaction carries its hash', async () => {
    const id = await liveOnramp(rail, '+254712340011');
    const done = await untilStatus(api(), key(), id, ['completed', 'failed', 'action_required']);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    const receipt = await anvil.publicClient.getTransactionReceipt({ hash: done.destination.transaction_hash });
    expect(receipt.from.toLowerCase()).to.equal(hot.toLowerCase());
    expect(await usdcOf(done.destination.wallet_address)).to.equal(minor(done.destination.amount));
  });

  it('a live on-ramp whose delivery the token reverts (a blacklisted wallet) fails delivery_failed and pays the payer back by B2C, once', async () => {
    const customer = await createCustomer(api(), key());
    const blacklisted = await anvil.walletClient.writeContract({
      address: token, abi: contracts().TestUSDC.abi, functionName: 'blacklist', args: [getAddress(customer.wallet.address)], account: anvil.deployer, chain: anvil.chain,
    });
    await anvil.publicClient.waitForTransactionReceipt({ hash: blacklisted });
    const q = await quote(api(), key(), { direction: 'onramp', source_amount: '1500', wallet_id: customer.wallet.id });
    const res = await api().http.post(`${BASE}/onramps`).set(writeHeaders(key())).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: '+254712340211', mobile_network: 'safaricom' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const failed = await mineUntil(res.body.id, ['failed', 'completed', 'action_required']);
    expect(failed.status, JSON.stringify(failed.failure)).to.equal('failed');
    expect(failed.failure.code).to.equal('delivery_failed');
    const back = await until(async () => {
      const tx = (await api().http.get(`${BASE}/transactions/${res.body.id}`).set(bearer(key()))).body;
      return tx.refund?.status === 'completed' && tx;
    }, { what: 'the fiat paid back' });
    expect(back.refund).to.deep.include({ amount: res.body.source.total_required, currency: 'KES', phone_number: '+254*****0211' });
    expect(back.refund.provider_reference).to.match(/^[A-Z0-9]{10}$/);
    // One B2C to the payer's number for our transaction id, executed once; no USDC reached the wallet.
    const b2c = rail.fake.payoutsTo(res.body.id);
    expect(b2c.map((r) => r.body.PartyB)).to.deep.equal(['254712340211']);
    expect(rail.fake.executions.get(res.body.id)).to.equal(1);
    expect(await usdcOf(customer.wallet.address)).to.equal(0n);
  });

  it('every send is signed through the signer the sender is given (where a KMS or HSM signer plugs in)', async () => {
    const inner = inProcessSigner(rail.pools.deps.config);
    const asked: string[] = [];
    const remote: TransactionSigner = {
      account(environment, who) {
        const key = inner.account(environment, who);
        return { address: key.address, signTransaction: async (tx) => (asked.push(`${environment}/${who.kind}/${tx.nonce}`), key.signTransaction(tx)) };
      },
    };
    const deps = { ds: await getDs(), config: rail.pools.deps.config, log: rail.pools.deps.log, signer: remote };
    const target = privateKeyToAccount(generatePrivateKey()).address;
    const row = (await send(deps, { environment: 'live', chain: 'base', reference: `test-signer-${Date.now()}`, purpose: 'gas_topup', signer: { kind: 'treasury' }, to: target, asset: 'native', amount: 1000n }))!;
    const receipt = await settle(deps, 'base', row, 10_000);
    expect(receipt.from.toLowerCase()).to.equal(hot.toLowerCase());
    expect(asked).to.deep.equal([`live/treasury/${row.nonce}`]);
  });

  it('a dropped transaction is broadcast again with the same nonce; a replaced one is signed again with a new nonce', async () => {
    const deps = { ds: await getDs(), config: rail.pools.deps.config, log: rail.pools.deps.log };
    const target = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d').address;
    await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    try {
      const row = (await send(deps, { environment: 'live', chain: 'base', reference: `test-drop-${Date.now()}`, purpose: 'gas_topup', signer: { kind: 'treasury' }, to: target, asset: 'native', amount: 1000n }))!;
      await anvil.publicClient.request({ method: 'anvil_dropTransaction' as never, params: [row.transaction_hash] as never });
      const settled = settle(deps, 'base', row, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 400));
      await mine();
      const receipt = await settled;
      expect(receipt.transactionHash).to.equal(row.transaction_hash);
      const [after]: { broadcasts: number; status: string }[] = await deps.ds.query(`SELECT broadcasts, status FROM chain_sends WHERE id = $1`, [row.id]);
      expect(after.status).to.equal('mined');
      expect(after.broadcasts).to.be.at.least(2);
    } finally {
      await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    }
    // Replaced: a managed wallet's transfer whose nonce another transaction (signed with the same key) took.
    const wallet = await managedWith('10');
    const [{ hd_index }]: { hd_index: number }[] = await deps.ds.query(`SELECT hd_index FROM wallets WHERE id = $1`, [wallet.id]);
    await setEth(getAddress(wallet.address), parseEther('1'));
    await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    let row;
    try {
      row = (await send(deps, { environment: 'live', chain: 'base', reference: `test-replace-${Date.now()}`, purpose: 'offramp_funding', signer: { kind: 'managed', index: hd_index }, to: target, asset: 'USDC', amount: minor('1') }))!;
      await anvil.publicClient.request({ method: 'anvil_dropTransaction' as never, params: [row.transaction_hash] as never });
      const owner = managedWalletAccount(getConfig().walletSeeds!.live!, hd_index);
      const other = await owner.signTransaction({ chainId: 8453, nonce: Number(row.nonce), to: owner.address, value: 0n, gas: 21_000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 10n ** 9n, type: 'eip1559' });
      await anvil.publicClient.request({ method: 'eth_sendRawTransaction' as never, params: [other] as never });
      await mine();
    } finally {
      await anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    }
    const receipt = await settle(deps, 'base', row!, 10_000);
    const [resent]: { nonce: string; replaced_hashes: string[]; transaction_hash: string }[] = await deps.ds.query(`SELECT nonce::text, replaced_hashes, transaction_hash FROM chain_sends WHERE id = $1`, [row!.id]);
    expect(resent.replaced_hashes).to.deep.equal([row!.transaction_hash]);
    expect(resent.nonce).to.equal(String(Number(row!.nonce) + 1));
    expect(receipt.transactionHash).to.equal(resent.transaction_hash);
    expect(await usdcOf(target)).to.equal(minor('1'));
  });

  it('outside funding of a managed wallet is credited only once it is deep enough, and never when a reorg takes it first', async () => {
    const wallet = (await managedWith('0'));
    // An open off-ramp keeps the watcher scanning.
    const open = await managedOfframp((await managedWith('0')).id, '20', '+254712345091');
    // The wallet's ledger (what the business's books say it holds; the live balance endpoint reads the chain itself).
    const credited = async () => (await (await getDs()).query(`SELECT count(*)::int AS n FROM journal_entries WHERE kind = 'wallet_deposit' AND metadata->>'wallet_id' = $1`, [wallet.id]))[0].n;
    const request = (method: string, params: unknown[] = []) => anvil.publicClient.request({ method: method as never, params: params as never });
    const inflow = async () => (await (await getDs()).query(`SELECT status FROM chain_inflows WHERE wallet_id = $1`, [wallet.id]))[0]?.status as string | undefined;
    // Seen by the watcher, one block deep: recorded, not credited.
    const snapshot = await request('evm_snapshot');
    await mintUsdc(anvil, token, getAddress(wallet.address), minor('9'));
    await until(async () => (await inflow()) === 'pending', { what: 'the funding seen by the watcher' });
    expect(await credited()).to.equal(0);
    // A reorg takes it away before it is deep enough: nothing was credited, and nothing is.
    await request('evm_revert', [snapshot]);
    await mine(CONFIRMATIONS + 1);
    await until(async () => (await inflow()) === 'reorged', { what: 'the inflow dropped by the reorg' });
    expect(await credited()).to.equal(0);
    // Funded again for good: credited once CONFIRMATIONS deep.
    await mintUsdc(anvil, token, getAddress(wallet.address), minor('9'));
    await until(async () => { await mine(); return (await (await getDs()).query(`SELECT 1 FROM chain_inflows WHERE wallet_id = $1 AND status = 'credited'`, [wallet.id])).length > 0; }, { what: 'the second funding credited' });
    expect(await credited()).to.equal(1);
    await untilStatus(api(), key(), open.id, ['action_required', 'completed', 'failed']);
  });

  it('the reconciliation compares every managed wallet and the hot wallet with the ledger, and exposes the drift', async () => {
    const onChain = await managedWith('12');
    const ledgerOnly = await fundedLiveWallet(rail, '7'); // credited in the ledger, never on the chain
    const [{ address: ledgerOnlyAddress }]: { address: string }[] = await (await getDs()).query(`SELECT address FROM wallets WHERE id = $1`, [ledgerOnly]);
    // The watcher records the outside funding of managed wallets while it scans (an off-ramp keeps it scanning).
    const open = await managedOfframp((await managedWith('0')).id, '20', '+254712345090');
    await until(async () => {
      await mine();
      const rows: unknown[] = await (await getDs()).query(`SELECT 1 FROM chain_inflows WHERE wallet_id = $1 AND status = 'credited'`, [onChain.id]);
      return rows.length > 0;
    }, { what: 'the managed wallet\'s funding recorded by the watcher and credited once deep enough' });
    // Outside funding of the hot wallet while the watcher runs is recorded too, so it is no drift.
    await mintUsdc(anvil, token, hot, minor('5'));
    await until(async () => {
      const rows: unknown[] = await (await getDs()).query(`SELECT 1 FROM chain_inflows WHERE kind = 'treasury' AND amount = $1`, [minor('5').toString()]);
      return rows.length > 0;
    }, { what: 'the hot wallet\'s funding recorded by the watcher' });
    await untilStatus(api(), key(), open.id, ['action_required']);
    const result = await reconcileChain({ ds: await getDs(), config: rail.pools.deps.config, log: rail.pools.deps.log }, 'live', 'base');
    if (result === 'not configured') throw new Error('reconciliation not configured');
    const of = (address: string) => result.find((d) => d.address.toLowerCase() === address.toLowerCase())!;
    expect(of(onChain.address)).to.deep.include({ chain_balance: minor('12'), ledger_balance: minor('12'), drift: 0n });
    expect(of(ledgerOnlyAddress)).to.deep.include({ chain_balance: 0n, ledger_balance: minor('7'), drift: -minor('7') });
    // The hot wallet's float was minted before the watcher began: the only difference our records cannot explain.
    expect(of(hot).drift).to.equal(minor('100000'));
    // The scheduled job runs the same comparison.
    const job = await reconcileChainJob.process({ data: { environment: 'live', chain: 'base' } } as never, rail.pools.deps);
    expect(job).to.deep.include({ addresses: result.length, drifted: result.filter((d) => d.drift !== 0n).length });
    const text = await metrics.metrics();
    expect(text).to.match(/rampway_ledger_chain_drifted_addresses\{environment="live",chain="base",kind="treasury"\} 1/);
    expect(text).to.match(/rampway_ledger_chain_drift_usdc_minor\{environment="live",chain="base",kind="managed_wallet"\} -?\d+/);
  });

  it('a payment intent paid in USDC: the watcher records the deposit, confirmed at depth; a reorged payment fails and, mined again, counts anew', async () => {
    const res = await api().http.post(`${BASE}/payment-intents`).set(writeHeaders(key())).send({
      amount: { currency: 'KES', value: '1500' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const intent = res.body;
    const amount = minor(intent.payment_instructions.amount);
    const { generatePrivateKey } = await import('viem/accounts');
    const payer = generatePrivateKey();
    const payerAddress = privateKeyToAccount(payer).address;
    await mintUsdc(anvil, token, payerAddress, amount);
    await setEth(payerAddress, parseEther('1'));
    const depositsOf = async () => (await api().http.get(`${BASE}/treasury/deposits?payment_intent_id=${intent.id}`).set(bearer(key()))).body.data as Record<string, any>[];
    const snapshot = await anvil.publicClient.request({ method: 'evm_snapshot' as never });
    const hash = await transferFrom(payer, intent.payment_instructions.address, amount);
    await until(async () => (await depositsOf()).length === 1, { what: 'the deposit recorded' });
    await anvil.publicClient.request({ method: 'evm_revert' as never, params: [snapshot] as never });
    await mine(2);
    const failed = await until(async () => {
      const d = await depositsOf();
      return d.length === 1 && d[0].status === 'failed' && d[0];
    }, { what: 'the reorged deposit failed' });
    expect(failed.transaction_hash).to.equal(hash);
    // The payer's transfer, mined again in the new chain: a new deposit, confirmed, and the intent completes.
    await mintUsdc(anvil, token, payerAddress, amount);
    await setEth(payerAddress, parseEther('1'));
    await transferFrom(payer, intent.payment_instructions.address, amount);
    const completed = await until(async () => {
      await mine();
      const i = (await api().http.get(`${BASE}/payment-intents/${intent.id}`).set(bearer(key()))).body;
      return i.status === 'completed' && i;
    }, { what: 'the intent completed', timeoutMs: 30_000, everyMs: 100 });
    expect(completed.status).to.equal('completed');
    const deposits = await depositsOf();
    expect(deposits.map((d) => d.status).sort()).to.deep.equal(['confirmed', 'failed']);
    const balance = (await api().http.get(`${BASE}/treasury/balance`).set(bearer(key()))).body;
    expect(minor(balance.available)).to.equal(amount);
    // Its deposit address is swept into the hot wallet.
    await until(async () => (await usdcOf(intent.payment_instructions.address)) === 0n, { what: 'the intent\'s deposit address swept' });
  });
});
