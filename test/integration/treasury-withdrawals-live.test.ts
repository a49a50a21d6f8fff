import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { erc20Abi, getAddress, parseEther, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, verifiedWallet } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { startLiveChainRail, type LiveChainRail } from '../helpers/live-rail.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { postEntry } from '../../shared/domain/ledger.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { jobId } from '../../shared/queues/registry.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { chainSendJob } from '../../workers/settlement/chain-send.job.js';
import { sendWithdrawal } from '../../shared/domain/treasury-withdrawals.js';
import { loadConfig } from '../../shared/config.js';

// Live treasury withdrawals on Anvil: the treasury hot wallet sends the USDC through the once-only chain send
// (recorded in chain_sends before broadcast); a hot wallet without gas leaves the withdrawal pending, re-driven by the
// sweeper even after its send job gave up, and it completes once gas is back, sent once. CONTRACT 18, "Jobs carry
// references, not money": a chain.send job added by hand to the real queue (the board, anyone holding Redis) with a
// destination and amount of its choosing sends nothing the database does not say.

const minor = (v: string) => toMinor(v, USDC_SCALE);

describe('treasury withdrawals on Anvil (live), and chain.send jobs added by hand', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  let hot: Address;

  before(async () => {
    rail = await startLiveChainRail({ pools: ['settlement'], env: { CHAIN_RECONCILE_MS: '3600000' } });
    hot = rail.hot;
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const setEth = (address: Address, wei: bigint) => rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [address, `0x${wei.toString(16)}`] as never });
  const usdcOf = (address: string) => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });
  const fundTreasury = (amount: string) => inUnit(rail.api.deps, (unit) => postEntry(unit.em, { businessId: rail.biz.businessId, environment: 'live' }, {
    kind: 'test_treasury_funding',
    postings: [{ account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -minor(amount) }, { account: { kind: 'treasury', asset: 'USDC' }, amount: minor(amount) }],
  }));
  const get = async (id: string) => (await rail.api.http.get(`${BASE}/treasury/withdrawals/${id}`).set(bearer(rail.key))).body;
  const untilDone = async (id: string) => {
    let last: Record<string, any> = {};
    return until(async () => {
      last = await get(id);
      return ['completed', 'failed'].includes(last.status) && last;
    }, { what: `withdrawal ${id} done`, describe: () => last, timeoutMs: 30_000, everyMs: 100 });
  };
  const sendsOf = async (id: string) => (await getDs()).query(`SELECT from_address, transaction_hash, status FROM chain_sends WHERE purpose = 'withdrawal' AND reference = $1`, [`withdrawal-${id}`]);
  const available = async () => minor((await rail.api.http.get(`${BASE}/treasury/balance`).set(bearer(rail.key))).body.available);
  const withdraw = async (walletId: string, amount: string) => {
    const res = await rail.api.http.post(`${BASE}/treasury/withdrawals`).set(writeHeaders(rail.key)).send({ wallet_id: walletId, amount });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body as Record<string, any>;
  };

  /** A withdrawal whose hot-wallet send was staged and refused once for gas (the caller took the hot wallet's gas). */
  const stagedWithoutGas = async (walletId: string, amount: string) => {
    const created = await withdraw(walletId, amount);
    const queue = rail.pools.deps.queues.settlement;
    const sendId = jobId('chain.send', 'live', 'base', `withdrawal-${created.id}`);
    await until(async () => ((await queue.getJob(sendId))?.attemptsMade ?? 0) >= 1, { what: 'a send attempt refused for gas' });
    return { created, queue, sendId };
  };

  it('the hot wallet sends the withdrawal on chain, recorded once; the hash is the mined transfer\'s', async () => {
    await fundTreasury('100');
    const before = await available();
    const wallet = await verifiedWallet(rail.api, rail.key);
    const created = await withdraw(wallet.id, '25');
    const done = await untilDone(created.id);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    const receipt = await rail.anvil.publicClient.getTransactionReceipt({ hash: done.transaction_hash });
    expect(receipt.from.toLowerCase()).to.equal(hot.toLowerCase());
    expect(await usdcOf(wallet.address)).to.equal(minor('25'));
    const sends = await sendsOf(created.id);
    expect(sends).to.deep.equal([{ from_address: hot.toLowerCase(), transaction_hash: done.transaction_hash, status: 'mined' }]);
    expect(before - (await available())).to.equal(minor('25'));
  });

  it('a hot wallet without gas leaves it pending; after its send gave up, the sweeper sends it once gas is back', async () => {
    await fundTreasury('10');
    const before = await available();
    const wallet = await verifiedWallet(rail.api, rail.key);
    const hotEth = await rail.anvil.publicClient.getBalance({ address: hot });
    await setEth(hot, 0n);
    try {
      const { created, queue, sendId } = await stagedWithoutGas(wallet.id, '10');
      expect((await get(created.id)).status).to.equal('pending');
      // Recorded as the withdrawal decided it (planned), not signed.
      expect(await sendsOf(created.id)).to.deep.equal([{ from_address: hot.toLowerCase(), transaction_hash: null, status: 'planned' }]);
      // The send job gives up (its last attempt's handler runs) and is gone from Redis: the withdrawal stays pending.
      const job = (await queue.getJob(sendId))!;
      await until(async () => (await queue.remove(sendId)) === 1, { what: 'the send job removed' });
      await chainSendJob.onFinalFailure!(job, new Error('the treasury hot wallet is short of gas'), rail.pools.deps);
      expect((await get(created.id)).status).to.equal('pending');
      expect(before - (await available())).to.equal(minor('10'));
      // Gas is back; the sweeper finds the pending withdrawal and stages its send again, under the same reference.
      await setEth(hot, hotEth > 0n ? hotEth : parseEther('10'));
      await (await getDs()).query(`UPDATE treasury_withdrawals SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [created.id]);
      const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
      expect(counts['treasury withdrawals whose hot-wallet send was lost or gave up']).to.equal(1);
      const done = await untilDone(created.id);
      expect(done.status).to.equal('completed');
      expect(await sendsOf(created.id)).to.have.length(1);
      expect(await usdcOf(wallet.address)).to.equal(minor('10'));
      // Completed: the sweeper has nothing more to do for it.
      await (await getDs()).query(`UPDATE treasury_withdrawals SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [created.id]);
      const after = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
      expect(after['treasury withdrawals whose hot-wallet send was lost or gave up'] ?? 0).to.equal(0);
    } finally {
      await setEth(hot, hotEth > 0n ? hotEth : parseEther('10'));
    }
  });

  const thief = () => privateKeyToAccount(generatePrivateKey()).address;
  const queue = () => rail.pools.deps.queues.settlement;
  /** Adds a chain.send job to the settlement pool's real queue, as the board or a Redis client would. */
  async function forge(data: Record<string, unknown>, wait = true) {
    const job = await queue().add('chain.send' as never, { environment: 'live', chain: 'base', ...data } as never, { jobId: `forged-${randomUUID()}`, attempts: 3, backoff: { type: 'fixed', delay: 300 } });
    if (wait) await until(async () => ['completed', 'failed'].includes(await job.getState()), { what: 'the forged job done', timeoutMs: 30_000 });
    return job;
  }
  /** A withdrawal of `amount` made while the hot wallet has no gas (its own send recorded and waiting); `meanwhile` runs then. */
  async function withdrawWithoutGas(walletId: string, amount: string, meanwhile: (id: string, reference: string) => Promise<void>): Promise<Record<string, any>> {
    await fundTreasury(amount);
    const hotEth = await rail.anvil.publicClient.getBalance({ address: hot });
    await setEth(hot, 0n);
    try {
      const created = await withdraw(walletId, amount);
      const reference = `withdrawal-${created.id}`;
      await until(async () => ((await queue().getJob(jobId('chain.send', 'live', 'base', reference)))?.attemptsMade ?? 0) >= 1, { what: 'its own send attempted' });
      await meanwhile(created.id, reference);
      return created;
    } finally {
      await setEth(hot, hotEth > 0n ? hotEth : parseEther('10'));
    }
  }
  const attempted = (id: string) => until(async () => ((await queue().getJob(id))?.attemptsMade ?? 0) >= 1, { what: `job ${id} attempted` });

  it('a wallet archived after its withdrawal\'s send was staged: the send job run again fails nothing; the send completes it, paid once', async () => {
    // The kernel simulator's seed 8: the amount went back to the treasury while the staged send was still to be mined.
    const wallet = await verifiedWallet(rail.api, rail.key);
    let debited = 0n;
    const created = await withdrawWithoutGas(wallet.id, '10', async (id) => {
      debited = await available();
      const archived = await rail.api.http.delete(`${BASE}/wallets/${wallet.id}`).set(writeHeaders(rail.key));
      expect(archived.status, JSON.stringify(archived.body)).to.equal(200);
      // The withdrawal's own send job delivered again (at least once): its staged send is in flight, so nothing fails.
      expect(await sendWithdrawal(rail.pools.deps, loadConfig(), id)).to.equal('send in flight: its outcome decides');
      expect((await get(id)).status).to.equal('pending');
    });
    const done = await untilDone(created.id);
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    expect(await usdcOf(wallet.address)).to.equal(minor('10'));
    expect(await available()).to.equal(debited);
  });

  it('a job naming no recorded send, with an address and amount of its own: nothing sent, the hot wallet unchanged', async () => {
    const to = thief();
    const before = await usdcOf(hot);
    const jobs = [
      await forge({ reference: `withdrawal-${randomUUID()}`, purpose: 'withdrawal', withdrawalId: randomUUID(), to, amount: minor('5000').toString() }),
      await forge({ reference: `onramp-${randomUUID()}`, purpose: 'onramp_delivery', transactionId: randomUUID(), to, amount: minor('5000').toString(), total: null }),
    ];
    expect(await usdcOf(to)).to.equal(0n);
    expect(await usdcOf(hot)).to.equal(before);
    expect(await (await getDs()).query(`SELECT 1 FROM chain_sends WHERE to_address = $1`, [to.toLowerCase()])).to.deep.equal([]);
    for (const job of jobs) expect(await job.getState()).to.equal('completed');
  });

  it('a job naming a recorded withdrawal send, with another address and amount: exactly the recorded send, once', async () => {
    const to = thief();
    const wallet = await verifiedWallet(rail.api, rail.key);
    const beforeHot = await usdcOf(hot);
    const created = await withdrawWithoutGas(wallet.id, '10', async (id, reference) => {
      await attempted((await forge({ reference, purpose: 'withdrawal', withdrawalId: id, to, amount: minor('900').toString() }, false)).id!);
    });
    expect((await untilDone(created.id)).status).to.equal('completed');
    // Another one after the send is mined.
    await forge({ reference: `withdrawal-${created.id}`, purpose: 'withdrawal', withdrawalId: created.id, to, amount: minor('900').toString() });
    expect(await usdcOf(to)).to.equal(0n);
    expect(await usdcOf(wallet.address)).to.equal(minor('10'));
    expect(beforeHot - (await usdcOf(hot))).to.equal(minor('10'));
    const sends = await (await getDs()).query(`SELECT to_address, amount::text, status FROM chain_sends WHERE reference = $1`, [`withdrawal-${created.id}`]);
    expect(sends).to.deep.equal([{ to_address: wallet.address.toLowerCase(), amount: minor('10').toString(), status: 'mined' }]);
  });

  it('a job from before sends were planned is resolved through the outbox row that staged it, never its own data', async () => {
    const to = thief();
    const wallet = await verifiedWallet(rail.api, rail.key);
    const created = await withdrawWithoutGas(wallet.id, '7', async (id, reference) => {
      // What the code before planned sends left: no chain_sends row, and an outbox payload carrying the destination and amount.
      await (await getDs()).transaction(async (em) => {
        await em.query(`DELETE FROM chain_sends WHERE reference = $1 AND status = 'planned'`, [reference]);
        await em.query(`UPDATE outbox_jobs SET payload = payload || jsonb_build_object('to', $2::text, 'amount', $3::text) WHERE job_name = 'chain.send' AND payload->>'reference' = $1`,
          [reference, wallet.address, minor('7').toString()]);
      });
      await attempted((await forge({ reference, purpose: 'withdrawal', withdrawalId: id, to, amount: minor('700').toString() }, false)).id!);
    });
    expect((await untilDone(created.id)).status).to.equal('completed');
    expect(await usdcOf(to)).to.equal(0n);
    expect(await usdcOf(wallet.address)).to.equal(minor('7'));
    expect(await (await getDs()).query(`SELECT 1 FROM chain_sends WHERE reference = $1`, [`withdrawal-${created.id}`])).to.have.length(1);
  });
});
