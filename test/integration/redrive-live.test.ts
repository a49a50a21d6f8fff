import { expect } from 'chai';
import { erc20Abi, parseEther, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bearer } from '../helpers/factories.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { liveExternalOfframp, liveOnramp, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { jobId } from '../../shared/queues/registry.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { findSend, recheckSends, send, settle } from '../../shared/chain/sender.js';

// Money owed after a transaction ended is never left to a job Redis may forget: the sweeper finds a refund whose
// send job was lost (or gave up), from the outbox that staged it, and the refund is made, once.
describe('the sweeper re-drives a live refund whose job was lost', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;

  before(async () => {
    rail = await startLiveChainRail({ pools: ['pricing', 'settlement', 'providers'], env: { CONFIRMATIONS_BASE: '1', CHAIN_RECONCILE_MS: '3600000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const setEth = (address: Address, wei: bigint) => rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [address, `0x${wei.toString(16)}`] as never });
  const mine = () => rail.anvil.publicClient.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
  const get = async (id: string) => (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;

  it('a refused payout\'s refund, its send job lost while the hot wallet had no gas, is sent once the sweeper runs', async () => {
    // A receiver M-Pesa refuses for good (magic 0002): the payout fails and the USDC goes back.
    const { account, created, total } = await liveExternalOfframp(rail, '+254712340002');
    // The hot wallet cannot pay gas: the refund's send waits, retried with backoff.
    await setEth(rail.hot, 0n);
    await transferUsdcFrom(rail, account.key, created.settlement.to_address, total);
    const failed = await until(async () => { await mine(); const tx = await get(created.id); return tx.status === 'failed' && tx; }, { what: 'the payout refused', everyMs: 100, timeoutMs: 30_000 });
    expect(failed.refund.status).to.equal('pending');
    const send = jobId('chain.send', 'live', 'base', `refund-${created.id}-${total}`);
    const queue = rail.pools.deps.queues.settlement;
    await until(async () => (await queue.getJobState(send)) === 'delayed', { what: 'the refund send waiting for gas' });
    // Redis forgets it.
    await queue.remove(send);
    expect(await queue.getJobState(send)).to.equal('unknown');
    await setEth(rail.hot, parseEther('10'));
    const ds = await getDs();
    await ds.query(`UPDATE transactions SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [created.id]);
    const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    // At least this one (the test database may hold pending refunds an earlier, interrupted run left behind).
    expect(counts['refund sends still pending']).to.be.at.least(1);
    const refunded = await until(async () => { await mine(); const tx = await get(created.id); return tx.refund?.status === 'completed' && tx; }, { what: 'the refund completed', everyMs: 100 });
    expect(refunded.status).to.equal('failed');
    const balance = await rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [account.address] });
    expect(balance).to.equal(total);
    const sends: unknown[] = await ds.query(`SELECT 1 FROM chain_sends WHERE purpose = 'refund' AND to_address = $1`, [account.address.toLowerCase()]);
    expect(sends).to.have.length(1);
  });

  it('a live on-ramp\'s delivery whose hot-wallet send job BullMQ failed for stalling (no handler run) is sent once the sweeper runs', async () => {
    await setEth(rail.hot, 0n);
    const id = await liveOnramp(rail, '+254712340311');
    const send = jobId('chain.send', 'live', 'base', `onramp-${id}`);
    const queue = rail.pools.deps.queues.settlement;
    await until(async () => { await mine(); return (await queue.getJobState(send)) === 'delayed'; }, { what: 'the delivery send waiting for gas', everyMs: 100, timeoutMs: 30_000 });
    expect((await get(id)).status).to.equal('processing');
    // BullMQ fails it for stalling (its worker killed under it twice), as its stall check does in Redis: out of the
    // delayed set into the failed one, its handler never run. Staging it anew under its id would be a no-op now.
    const prefix = rail.pools.deps.config.redisPrefix;
    const redis = testRedis();
    expect(await redis.zrem(`${prefix}:settlement:delayed`, send)).to.equal(1);
    await redis.zadd(`${prefix}:settlement:failed`, Date.now(), send);
    await redis.hset(`${prefix}:settlement:${send}`, 'failedReason', 'job stalled more than allowable limit', 'finishedOn', String(Date.now()));
    expect(await queue.getJobState(send)).to.equal('failed');
    await setEth(rail.hot, parseEther('10'));
    const ds = await getDs();
    await ds.query(`UPDATE transactions SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [id]);
    await sweepJob.process({ data: {} } as never, rail.pools.deps);
    const done = await until(async () => { await mine(); const tx = await get(id); return tx.status === 'completed' && tx; }, { what: 'the delivery completed', everyMs: 100 });
    expect(done.destination.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
    const sends: unknown[] = await ds.query(`SELECT 1 FROM chain_sends WHERE reference = $1`, [`onramp-${id}`]);
    expect(sends).to.have.length(1);
  });

  it('a reorg that takes a mined send off the chain: the next send keeps its own nonce, and the watcher broadcasts the first again', async () => {
    const deps = rail.pools.deps;
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const request = (method: string, params: unknown[] = []) => rail.anvil.publicClient.request({ method: method as never, params: params as never });
    const usdcOf = () => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [to] });
    const snapshot = await request('evm_snapshot');
    const input = (reference: string) => ({ environment: 'live' as const, chain: 'base' as const, reference, purpose: 'refund' as const, signer: { kind: 'treasury' as const }, to, asset: 'USDC' as const, amount: 1_000_000n });
    const first = (await send(deps, input(`reorg-first-${Date.now()}`)))!;
    await settle(deps, 'base', first);
    expect((await findSend(deps.ds, 'live', 'base', first.reference))!.status).to.equal('mined');
    expect(await usdcOf()).to.equal(1_000_000n);
    const broadcastsOf = async () => Number((await deps.ds.query(`SELECT broadcasts FROM chain_sends WHERE reference = $1`, [first.reference]))[0].broadcasts);
    const broadcastBefore = await broadcastsOf();
    // The block that held it leaves the chain (Anvil drops its transactions with it).
    await request('evm_revert', [snapshot]);
    await request('anvil_mine', ['0x2']);
    expect(await usdcOf()).to.equal(0n);
    // A send signed now does not take the nonce the first still owns (the node's count went back).
    // (The pools run beside this test: a send of theirs from the same wallet may take the nonce right after the
    // first, so the second's is the next one free after every nonce we have recorded, never one the chain forgot.)
    const second = (await send(deps, input(`reorg-second-${Date.now()}`)))!;
    expect(BigInt(second.nonce) > BigInt(first.nonce), 'a nonce after the first').to.equal(true);
    const between: { nonce: string }[] = await deps.ds.query(
      `SELECT nonce::text FROM chain_sends WHERE environment = 'live' AND chain = 'base' AND from_address = $1 AND nonce > $2 AND nonce < $3 ORDER BY nonce`,
      [first.from_address, first.nonce, second.nonce]);
    expect(between.map((row) => BigInt(row.nonce))).to.deep.equal(Array.from({ length: Number(BigInt(second.nonce) - BigInt(first.nonce) - 1n) }, (_, i) => BigInt(first.nonce) + 1n + BigInt(i)));
    // The watcher's pass finds the first's receipt gone and broadcasts it again: both end on the chain, each once.
    // (The pools' own scan may pass first and find it: then this pass finds nothing left to do, and it was broadcast.)
    const reorged = (await recheckSends(deps, 'live', 'base')).reorged;
    await until(async () => reorged > 0 || (await broadcastsOf()) > broadcastBefore, { what: 'the first send broadcast again after the reorg' });
    await settle(deps, 'base', second);
    await until(async () => (await recheckSends(deps, 'live', 'base')) && (await findSend(deps.ds, 'live', 'base', first.reference))!.status === 'mined', { what: 'the first send mined again' });
    expect(await usdcOf()).to.equal(2_000_000n);
    expect((await findSend(deps.ds, 'live', 'base', first.reference))!.transaction_hash).to.equal(first.transaction_hash);
  });

  describe('a send the chain lost while the node says otherwise', () => {
    const request = (method: string, params: unknown[] = []) => rail.anvil.publicClient.request({ method: method as never, params: params as never });
    const input = (reference: string, to: Address) => ({ environment: 'live' as const, chain: 'base' as const, reference, purpose: 'refund' as const, signer: { kind: 'treasury' as const }, to, asset: 'USDC' as const, amount: 1_000_000n });
    const usdcOf = (to: Address) => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [to] });
    // Mining stops for the length of the test: a send waits in the node's pool, known and unmined.
    beforeEach(() => request('evm_setAutomine', [false]));
    afterEach(async () => {
      await request('evm_setAutomine', [true]);
      await request('anvil_mine', ['0x1']);
    });

    it('a mined send whose block left the chain, back in the node\'s pool and unmined, is sent again (never left as mined)', async () => {
      const deps = rail.pools.deps;
      const to = privateKeyToAccount(generatePrivateKey()).address;
      const sent = (await send(deps, input(`pooled-${Date.now()}`, to)))!;
      expect((await rail.anvil.publicClient.getTransaction({ hash: sent.transaction_hash })).blockNumber).to.equal(null);
      // As a reorg leaves it: recorded mined in a block that is gone, the transaction back in a pool.
      const head = await rail.anvil.publicClient.getBlockNumber({ cacheTime: 0 });
      await deps.ds.query(`UPDATE chain_sends SET status = 'mined', block_number = $2 WHERE id = $1`, [sent.id, head.toString()]);
      await recheckSends(deps, 'live', 'base');
      expect((await findSend(deps.ds, 'live', 'base', sent.reference))!.status, 'sent again').to.equal('sent');
      await request('evm_setAutomine', [true]);
      await request('anvil_mine', ['0x1']);
      await until(async () => (await recheckSends(deps, 'live', 'base')) && (await findSend(deps.ds, 'live', 'base', sent.reference))!.status === 'mined', { what: 'the send mined' });
      expect(await usdcOf(to)).to.equal(1_000_000n);
    });

    it('sends waiting behind a nonce the chain never used: the send of ours holding it is broadcast again, whatever its record says', async () => {
      const deps = rail.pools.deps;
      const to = privateKeyToAccount(generatePrivateKey()).address;
      const first = (await send(deps, input(`gap-first-${Date.now()}`, to)))!;
      // The node forgets it, and its record says mined long ago (no pass over recent sends looks at it again).
      await request('anvil_dropTransaction', [first.transaction_hash]);
      await deps.ds.query(`UPDATE chain_sends SET status = 'mined', block_number = 1, updated_at = now() - interval '2 days' WHERE id = $1`, [first.id]);
      const second = (await send(deps, input(`gap-second-${Date.now()}`, to)))!;
      expect(BigInt(second.nonce) > BigInt(first.nonce)).to.equal(true);
      await deps.ds.query(`UPDATE chain_sends SET created_at = now() - interval '1 minute' WHERE id = $1`, [second.id]);
      await recheckSends(deps, 'live', 'base');
      expect((await findSend(deps.ds, 'live', 'base', first.reference))!.status, 'the gap\'s send is sent again').to.equal('sent');
      expect(await rail.anvil.publicClient.getTransaction({ hash: first.transaction_hash }), 'broadcast again').to.have.property('nonce', Number(first.nonce));
      await request('evm_setAutomine', [true]);
      await request('anvil_mine', ['0x1']);
      await until(async () => {
        await recheckSends(deps, 'live', 'base');
        const [a, b] = [await findSend(deps.ds, 'live', 'base', first.reference), await findSend(deps.ds, 'live', 'base', second.reference)];
        return a!.status === 'mined' && b!.status === 'mined';
      }, { what: 'both sends mined' });
      expect(await usdcOf(to)).to.equal(2_000_000n);
    });
  });
});
