import { expect } from 'chai';
import { erc20Abi, getAddress, keccak256, parseEther, toHex, type Address, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { bearer } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { expectLedgerSound, history, kesBeneficiary, offramp, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { mintUsdc, type Anvil } from '../helpers/chain.js';
import { startLiveChainRail, type LiveChainRail } from '../helpers/live-rail.js';
import { startRpcProxy, type RpcProxy } from '../helpers/rpc-proxy.js';
import { writeHeaders } from '../helpers/factories.js';
import { send, settle, SendPendingError } from '../../shared/chain/sender.js';
import { scanChain } from '../../shared/chain/scanner.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { loadConfig, type Config } from '../../shared/config.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { confirmSettlement, expireSettlement, observeTransfer, submitOfframp } from '../../shared/domain/offramps.js';
import { settlementOf } from '../../shared/domain/settlements.js';
import { liveChain } from '../../shared/chain/live-chain.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { moveTx } from '../helpers/moves.js';
import { fundSandboxWallet } from '../../shared/domain/wallet-balances.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';

// CONTRACT.md section 14, "Chain truth", on a real Anvil playing base: an RPC error is "unknown", never "not found" (a
// JSON-RPC proxy fails the lookups a test chooses); confirmations count from the last transfer counted; a settlement's
// expiry never races a managed wallet's send; the watcher's first scan sees transfers made before it ran.

const minor = (v: string) => toMinor(v, USDC_SCALE);
const CONFIRMATIONS = 3;

describe('chain truth on Anvil', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  let anvil: Anvil;
  let token: Address;

  before(async () => {
    rail = await startLiveChainRail({ pools: ['pricing'], env: { CONFIRMATIONS_BASE: String(CONFIRMATIONS), CHAIN_RECONCILE_MS: '3600000' } });
    ({ anvil, token } = rail);
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const usdcOf = (address: string) => anvil.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });
  const mine = (n = 1) => anvil.publicClient.request({ method: 'anvil_mine' as never, params: [`0x${n.toString(16)}`] as never });
  const deps = async (config: Config = rail.pools.deps.config) => ({ ...rail.pools.deps, ds: await getDs(), config });
  /** The rail's configuration with base read through `rpcUrl`. */
  const through = (rpcUrl: string): Config => ({ ...rail.pools.deps.config, chains: { ...rail.pools.deps.config.chains, base: { ...rail.pools.deps.config.chains.base, rpcUrl } } });

  describe('a send whose lookups fail is unknown, never re-signed (defect 3)', () => {
    let proxy: RpcProxy;
    afterEach(() => proxy?.close());

    it('mined, then receipt and transaction lookups erroring while the nonce reads as used: checked again, never signed again', async () => {
      const target = privateKeyToAccount('0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a').address;
      const before = await anvil.publicClient.getBalance({ address: target });
      const d = await deps();
      const row = (await send(d, { environment: 'live', chain: 'base', reference: `truth-mined-${Date.now()}`, purpose: 'gas_topup', signer: { kind: 'treasury' }, to: target, asset: 'native', amount: 1234n }))!;
      await anvil.publicClient.waitForTransactionReceipt({ hash: row.transaction_hash });
      const hotNonce = await anvil.publicClient.getTransactionCount({ address: rail.hot });

      // A rate-limited (or failing) node: every receipt and transaction lookup errors; the nonce reads succeed.
      proxy = await startRpcProxy(anvil.rpcUrl, { fail: (method) => method === 'eth_getTransactionReceipt' || method === 'eth_getTransactionByHash' });
      let pending: unknown;
      await settle(await deps(through(proxy.url)), 'base', row, 1_500).catch((err: unknown) => { pending = err; });
      expect(pending).to.be.instanceOf(SendPendingError);
      expect(proxy.failed.get('eth_getTransactionReceipt')).to.be.at.least(2);

      // A lagging node: it answers "no such receipt or transaction" for the mined send. The transaction that took the
      // nonce is read from its block: ours, so nothing is signed again.
      let lookups = 0;
      proxy.setFail((method) => ((method === 'eth_getTransactionReceipt' || method === 'eth_getTransactionByHash') && lookups++ < 4 ? 'null' : false));
      await settle(await deps(through(proxy.url)), 'base', row, 1_500).catch((err: unknown) => { pending = err; });
      expect(proxy.calls.get('eth_getBlockByNumber')).to.be.at.least(1);
      proxy.setFail(() => false);

      const [after]: { nonce: string; replaced_hashes: string[]; transaction_hash: string; status: string }[] = await d.ds.query(
        `SELECT nonce::text, replaced_hashes, transaction_hash, status FROM chain_sends WHERE id = $1`, [row.id]);
      expect(after).to.deep.include({ nonce: row.nonce, replaced_hashes: [], transaction_hash: row.transaction_hash });
      expect(await anvil.publicClient.getTransactionCount({ address: rail.hot })).to.equal(hotNonce);
      expect(await anvil.publicClient.getBalance({ address: target })).to.equal(before + 1234n);

      // The node healthy again: the send is read as mined, once.
      const receipt = await settle(await deps(through(proxy.url)), 'base', row, 5_000);
      expect(receipt.transactionHash).to.equal(row.transaction_hash);
      expect(await anvil.publicClient.getBalance({ address: target })).to.equal(before + 1234n);
    });
  });

  describe('the watcher\'s first scan (defect 11)', () => {
    it('starts at the block the oldest open deposit address was issued at, so a transfer made before it ran is recorded', async () => {
      const ds = await getDs();
      await ds.query(`DELETE FROM chain_cursors WHERE environment = 'live' AND chain = 'base'`);
      const res = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({
        amount: { currency: 'KES', value: '1500' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' },
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const intent = res.body;
      const [{ issued_block }]: { issued_block: string | null }[] = await ds.query(`SELECT issued_block::text FROM payment_intents WHERE id = $1`, [intent.id]);
      expect(issued_block).to.not.equal(null);
      // Paid before the watcher ever ran, and buried under later blocks.
      await mintUsdc(anvil, token, getAddress(intent.payment_instructions.address), minor('1'));
      await mine(5);
      const result = await scanChain(await deps(), { environment: 'live', chain: 'base', client: anvil.publicClient, token, maxRange: 2000n });
      expect(result.from <= BigInt(issued_block!)).to.equal(true);
      expect(result.matched).to.equal(1);
      const deposits: unknown[] = await ds.query(`SELECT 1 FROM treasury_deposits WHERE payment_intent_id = $1`, [intent.id]);
      expect(deposits).to.have.length(1);
    });

    it('SETTLEMENT_START_BLOCK_<CHAIN> names where the first scan starts', async () => {
      expect(loadConfig({ SETTLEMENT_START_BLOCK_BASE: '1234' }).chains.base.startBlock).to.equal(1234n);
      expect(loadConfig({}).chains.base.startBlock).to.equal(null);
      expect(() => loadConfig({ SETTLEMENT_START_BLOCK_POLYGON: '-1' })).to.throw(/SETTLEMENT_START_BLOCK_POLYGON/);
      const ds = await getDs();
      await ds.query(`DELETE FROM chain_cursors WHERE environment = 'live' AND chain = 'base'`);
      const config = rail.pools.deps.config;
      const result = await scanChain(await deps({ ...config, chains: { ...config.chains, base: { ...config.chains.base, startBlock: 2n } } }), {
        environment: 'live', chain: 'base', client: anvil.publicClient, token, maxRange: 2000n,
      });
      expect(result.from).to.equal(2n);
    });
  });

  describe('settlement expiry and a managed wallet\'s send in flight (defect 8)', () => {
    it('expiry leaves a transaction in signing alone; the send then moves it on and nothing is lost', async () => {
      const key = rail.biz.sandboxKey;
      const customer = await createCustomer(rail.api, key);
      const ds = await getDs();
      await ds.transaction((em) => fundSandboxWallet(em, rail.pools.deps.config, { businessId: rail.biz.businessId, environment: 'sandbox' }, customer.wallet.id, { chain: 'base', amount: '100' }));
      const beneficiaryId = await kesBeneficiary(rail.api, key);
      const q = await quote(rail.api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
      const created = await offramp(rail.api, key, q.id, customer.wallet.id);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const id = created.body.id;
      const d = await deps();
      // The submit step has taken it to signing (its send about to leave) when the settlement's deadline passes.
      const signing = (await inUnit(d, async (unit) => moveTx(unit, (await loadTransaction(unit.em, id))!, 'signing')))!.row;
      await ds.query(`UPDATE settlements SET expires_at = now() - interval '1 second' WHERE transaction_id = $1`, [id]);
      const outcome = await inUnit(d, async (unit) => expireSettlement(unit, d.config, (await loadTransaction(unit.em, id))!));
      expect(outcome).to.equal('send in flight (signing)');
      expect((await loadTransaction(ds, id))!.status).to.equal('signing');
      // The send decides: it leaves the wallet and the transaction moves on with it.
      expect(await submitOfframp(d, () => chainFor('sandbox', d.config), signing.id)).to.equal('submitted');
      const now = (await loadTransaction(ds, id))!;
      expect(now.status).to.be.oneOf(['awaiting_funds', 'funded']);
      const settlement = (await rail.api.http.get(`${BASE}/transactions/${id}/settlement`).set(bearer(key))).body;
      expect(settlement).to.include({ received_amount: settlement.total_required });
      expect(await history(id)).to.include.members(['created', 'signing', 'submitting', 'awaiting_funds']);
    });
  });

  describe('a reorg that takes a block away and then restores the very same block (defect 7)', () => {
    let proxy: RpcProxy;
    afterEach(() => proxy?.close());

    it('counted, reversed while another fork holds that height, counted again in the same block: the ledger holds one deposit', async () => {
      const wallet = await verifiedWallet(rail.api, rail.key);
      const q = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(rail.api, rail.key, '+254712345120') });
      const created = (await offramp(rail.api, rail.key, q.id, wallet.id)).body;
      await mine();
      const block = await anvil.publicClient.getBlock();
      proxy = await startRpcProxy(anvil.rpcUrl);
      const config = through(proxy.url);
      const chain = liveChain(config);
      const d = await deps(config);
      // The fact the watcher would report (a hash of its own: no background scan can count it first).
      const transfer = {
        transactionHash: keccak256(toHex(`restored-${created.id}`)), logIndex: 0, amount: minor(created.settlement.total_required),
        blockNumber: block.number, blockHash: block.hash, from: wallet.address,
      };
      const observe = () => inUnit(d, async (unit) => observeTransfer(unit, config, (await settlementOf(unit.em, created.id, true))!, transfer, undefined, chain));
      const statusOf = async () => (await loadTransaction(await getDs(), created.id))!.status;
      const clearing = async () => {
        const rows: { kind: string; amount: string }[] = await (await getDs()).query(
          `SELECT e.kind, p.amount::text FROM journal_entries e JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
            WHERE e.metadata->>'settlement_id' = $1 AND a.kind = 'settlement_clearing'`, [created.settlement.id]);
        const deposit = rows.find((r) => r.kind === 'offramp_deposit');
        return { kinds: rows.map((r) => r.kind).sort(), net: rows.reduce((sum, r) => sum + BigInt(r.amount), 0n), deposit: deposit ? BigInt(deposit.amount) : 0n };
      };

      await observe();
      expect(await statusOf()).to.equal('awaiting_funds');
      // The node follows another fork for a while: that height holds a different block.
      const height = toHex(block.number);
      proxy.setRewrite((method, params, result) =>
        (method === 'eth_getBlockByNumber' && (params as unknown[])[0] === height && result ? { ...(result as object), hash: keccak256(toHex(`fork-${block.hash}`)) } : result));
      expect(await inUnit(d, async (unit) => confirmSettlement(unit, config, () => chain, created.id, 1))).to.equal('reorg: awaiting transfer again');
      expect(await statusOf()).to.equal('created');
      expect((await clearing()).net).to.equal(0n);
      // The original block comes back, the same hash: the transfer is counted again and posts again.
      proxy.setRewrite(null);
      await observe();
      expect(await statusOf()).to.equal('awaiting_funds');
      const ledger = await clearing();
      expect(ledger.kinds).to.deep.equal(['offramp_deposit', 'offramp_deposit', 'offramp_deposit_reorg']);
      expect(ledger.net).to.equal(ledger.deposit);
      expect(ledger.deposit > 0n).to.equal(true);
    });
  });
});

describe('chain truth on Anvil, the watcher running: confirmations from the last transfer (defect 4)', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  let anvil: Anvil;
  let token: Address;

  before(async () => {
    rail = await startLiveChainRail({
      pools: ['pricing', 'settlement', 'providers'], env: { CONFIRMATIONS_BASE: String(CONFIRMATIONS), CHAIN_RECONCILE_MS: '3600000' },
    });
    ({ anvil, token } = rail);
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const mine = (n = 1) => anvil.publicClient.request({ method: 'anvil_mine' as never, params: [`0x${n.toString(16)}`] as never });
  const automine = (on: boolean) => anvil.publicClient.request({ method: 'evm_setAutomine' as never, params: [on] as never });

  async function transfer(from: PrivateKeyAccount, to: string, amount: bigint): Promise<Hex> {
    return anvil.walletClient.writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [getAddress(to), amount], account: from, chain: anvil.chain });
  }

  it('a small transfer made deep, then the rest: no payout until the rest has its confirmations', async () => {
    const wallet = await verifiedWallet(rail.api, rail.key);
    const payer = wallet.account;
    const beneficiaryId = await kesBeneficiary(rail.api, rail.key, '+254712345110');
    const q = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
    const created = (await offramp(rail.api, rail.key, q.id, wallet.id)).body;
    const total = minor(created.settlement.total_required);
    const payerAddress = payer.address;
    await mintUsdc(anvil, token, payerAddress, total);
    await anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [payerAddress, `0x${parseEther('1').toString(16)}`] as never });
    const settlementOf = async () => (await rail.api.http.get(`${BASE}/transactions/${created.id}/settlement`).set(bearer(rail.key))).body;

    // A tiny transfer, buried deep.
    await anvil.publicClient.waitForTransactionReceipt({ hash: await transfer(payer, created.settlement.to_address, minor('1')) });
    await until(async () => (await settlementOf()).received_amount === '1.000000', { what: 'the small transfer counted' });
    await mine(CONFIRMATIONS + 3);
    // The rest, in a block the test holds at the head: one confirmation.
    await automine(false);
    try {
      await transfer(payer, created.settlement.to_address, total - minor('1'));
      await mine();
      await untilStatus(rail.api, rail.key, created.id, ['awaiting_funds', 'funded', 'processing', 'completed']);
      await new Promise((resolve) => setTimeout(resolve, 900)); // several confirmation checks at the same head
      const tx = (await rail.api.http.get(`${BASE}/transactions/${created.id}`).set(bearer(rail.key))).body;
      expect(tx.status).to.equal('awaiting_funds');
      expect((await settlementOf()).confirmations).to.equal(1);
    } finally {
      await automine(true);
    }
    const done = await until(async () => {
      await mine();
      const tx = (await rail.api.http.get(`${BASE}/transactions/${created.id}`).set(bearer(rail.key))).body;
      return ['completed', 'failed', 'action_required'].includes(tx.status) && tx;
    }, { what: 'the payout', timeoutMs: 30_000, everyMs: 100 });
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
  });
});
