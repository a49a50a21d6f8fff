import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness } from '../helpers/factories.js';
import { createCustomer } from '../helpers/wallets.js';
import { drainQueues, startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, kesBeneficiary, offramp, quote, untilStatus } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { txJobs } from '../../shared/domain/lifecycle-jobs.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { until } from '../helpers/until.js';

/** The real worker process, as the Procfile runs it (node with tsx as its loader: a SIGKILL reaches it, not a wrapper). */
function workerProcess(pools: string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', ...pools], {
    env: { ...process.env, LOG_LEVEL: 'silent', SANDBOX_STEP_MS: '40', OUTBOX_POLL_MS: '100' },
    stdio: 'ignore',
  });
}

describe('a worker process killed in the middle of lifecycles', function () {
  this.timeout(90_000);
  let api: ApiHarness;
  let pricing: RunningPools;
  let worker: ChildProcess | undefined;

  before(async () => {
    api = await startApi();
    pricing = await startPools(['pricing']);
  });
  after(async () => {
    worker?.kill('SIGKILL');
    await pricing?.close();
    await api?.close();
  });

  it('SIGKILL, restart: every transaction ends completed, each payout made once, no ledger entry twice', async () => {
    const key = (await makeBusiness()).sandboxKey;
    const beneficiary = await kesBeneficiary(api, key);
    const txIds: string[] = [];
    for (let i = 0; i < 12; i++) {
      const customer = await createCustomer(api, key);
      await fund(api, key, customer.wallet.id, '30');
      const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiary });
      const res = await offramp(api, key, q.id, customer.wallet.id);
      expect(res.status).to.equal(201);
      txIds.push(res.body.id);
    }
    worker = workerProcess(['settlement', 'providers', 'sandbox']);
    const ds = await getDs();
    const progressed = async () =>
      Number((await ds.query(`SELECT count(*) AS n FROM status_history WHERE resource_id = ANY($1) AND to_status <> 'created'`, [txIds]))[0].n);
    await until(async () => (await progressed()) >= 10, { timeoutMs: 20_000, everyMs: 10, what: 'ten steps before the kill' });
    worker.kill('SIGKILL');
    await new Promise((r) => worker!.once('exit', r));
    const [{ n: done }] = await ds.query(`SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1) AND status = 'completed'`, [txIds]);
    expect(done, 'killed in the middle, not after the end').to.be.lessThan(txIds.length);
    worker = workerProcess(['settlement', 'providers', 'sandbox']);
    for (const id of txIds) expect((await untilStatus(api, key, id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const payouts = await ds.query(`SELECT reference, evaluations FROM provider_requests WHERE kind = 'payout' AND reference = ANY($1)`, [txIds]);
    expect(payouts).to.have.length(txIds.length);
    for (const p of payouts) expect(p.evaluations, `payout ${p.reference}`).to.equal(1);
    const entries = await ds.query(
      `SELECT reference, count(*)::int AS n FROM journal_entries WHERE reference LIKE ANY($1) GROUP BY reference`,
      [txIds.map((id) => `%${id}`)],
    );
    expect(entries.length).to.equal(txIds.length * 2); // the funding and the payout of each
    for (const e of entries) expect(e.n, e.reference).to.equal(1);
    await expectLedgerSound();
    worker.kill('SIGKILL');
    await new Promise((r) => worker!.once('exit', r));
    worker = undefined;
  });

  it('a step job Redis lost is found by the sweeper and run under its own id: the payout still happens once', async () => {
    const key = (await makeBusiness()).sandboxKey;
    const beneficiary = await kesBeneficiary(api, key);
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '30');
    const settlement = await startPools(['settlement']);
    try {
      const tx = (await offramp(api, key, (await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiary })).id, customer.wallet.id)).body;
      const funded = await untilStatus(api, key, tx.id, ['funded']);
      const lost = txJobs.payout({ ...funded, retry_count: 0, environment: 'sandbox' } as never);
      expect(await settlement.deps.queues.providers.getJobState(lost.id)).to.be.oneOf(['waiting', 'delayed']);
      await settlement.deps.queues.providers.remove(lost.id); // Redis forgot it
      const ds = await getDs();
      await ds.query(`UPDATE transactions SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [tx.id]);
      const counts = (await sweepJob.process({ data: {} } as never, settlement.deps)) as Record<string, number>;
      expect(counts['transactions funded']).to.be.at.least(1);
      expect(await settlement.deps.queues.providers.getJobState(lost.id)).to.be.oneOf(['waiting', 'delayed']);
      const providers = await startPools(['providers']);
      try {
        expect((await untilStatus(api, key, tx.id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
        await drainQueues(providers);
      } finally {
        await providers.close();
      }
      expect((await ds.query(`SELECT evaluations FROM provider_requests WHERE reference = $1`, [tx.id]))[0].evaluations).to.equal(1);
    } finally {
      await settlement.close();
    }
  });
});
