import { expect } from 'chai';
import { makeBusiness } from '../helpers/factories.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { payoutEvaluations, startOfframps, startService, untilEnded, type Service } from './service.js';

const LIFECYCLES = Number(process.env.CHAOS_LIFECYCLES ?? 200);
const KILLS = Number(process.env.CHAOS_KILLS ?? 5);

describe(`chaos: the worker process SIGKILLed ${KILLS} times at random points during ${LIFECYCLES} sandbox off-ramps`, function () {
  this.timeout(600_000);
  let service: Service;
  before(async () => {
    service = await startService();
  });
  after(() => service?.stop());

  it('every transaction ends completed, each payout is asked for once, the ledger balances', async () => {
    const key = (await makeBusiness()).sandboxKey;
    const ids = await startOfframps(service, key, LIFECYCLES);
    const ds = await getDs();
    const ended = async () => (await ds.query(`SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1) AND status IN ('completed', 'failed', 'action_required')`, [ids]))[0].n as number;
    const killedAt: number[] = [];
    for (let i = 0; i < KILLS && (await ended()) < ids.length; i++) {
      // Somewhere in the next 0.2 to 1.5 s: whatever the worker holds then (a signing, a payout, a commit) is cut off.
      await new Promise((r) => setTimeout(r, 200 + Math.floor(Math.random() * 1300)));
      killedAt.push(await ended());
      await service.killWorkers();
      await service.startWorkers();
    }
    const counts = await untilEnded(ids, 300_000);
    console.log(`      killed with ${killedAt.join(', ')} of ${ids.length} ended; final ${JSON.stringify(counts)}`);
    expect(killedAt.some((n) => n < ids.length), 'at least one kill landed mid-run').to.equal(true);
    expect(counts).to.deep.equal({ completed: ids.length });
    const evaluations = await payoutEvaluations(ids);
    expect(evaluations).to.have.length(ids.length);
    expect(evaluations.every((n) => n === 1), 'no payout asked for twice').to.equal(true);
    const entries = await ds.query(`SELECT reference, count(*)::int AS n FROM journal_entries WHERE reference LIKE ANY($1) GROUP BY reference HAVING count(*) > 1`, [ids.map((id) => `%${id}%`)]);
    expect(entries, 'no ledger entry twice').to.deep.equal([]);
    await expectLedgerSound();
  });
});
