import { expect } from 'chai';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { payoutEvaluations, startOfframps, startService, untilEnded, type Service } from './service.js';

const LIFECYCLES = Number(process.env.CHAOS_LIFECYCLES ?? 200);
const KILLS = Number(process.env.CHAOS_KILLS ?? 5);

describe(`chaos: the worker process SIGKILLed ${KILLS} times at random points during ${LIFECYCLES} sandbox off-ramps`, function () {
  this.timeout(600_000);
  let service: Service;
  before(async () => {
    // Steps of 100 ms: lifecycles last about a second, so kills land in them (and in the creation of later ones).
    service = await startService({ SANDBOX_STEP_MS: '100' });
  });
  after(() => service?.stop());

  it('every transaction ends completed, each payout is asked for once, the ledger balances', async () => {
    // A limit no test client reaches: the faults, not the rate limit, are under test.
    const key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
    const ds = await getDs();
    const creating = startOfframps(service, key, LIFECYCLES);
    const killedAt: string[] = [];
    for (let i = 0; i < KILLS; i++) {
      // Somewhere in the next 1 to 4 s: whatever the worker holds then (a pricing, a signing, a payout, a commit) is cut off.
      await new Promise((r) => setTimeout(r, 1000 + Math.floor(Math.random() * 3000)));
      const [{ started, ended }] = await ds.query(
        `SELECT count(*)::int AS started, count(*) FILTER (WHERE status IN ('completed', 'failed', 'action_required'))::int AS ended FROM transactions t
          JOIN api_keys k ON k.business_id = t.business_id WHERE k.prefix = $1`, [key.slice(0, 15)],
      );
      killedAt.push(`${ended}/${started}`);
      await service.killWorkers();
      await service.startWorkers();
    }
    const ids = await creating;
    const counts = await untilEnded(ids, 300_000);
    console.log(`      killed when ended/started were ${killedAt.join(', ')} (of ${ids.length}); final ${JSON.stringify(counts)}`);
    expect(killedAt.some((k) => Number(k.split('/')[0]) < ids.length), 'kills landed mid-run').to.equal(true);
    expect(counts).to.deep.equal({ completed: ids.length });
    const evaluations = await payoutEvaluations(ids);
    expect(evaluations).to.have.length(ids.length);
    expect(evaluations.every((n) => n === 1), 'no payout asked for twice').to.equal(true);
    const entries = await ds.query(`SELECT reference, count(*)::int AS n FROM journal_entries WHERE reference LIKE ANY($1) GROUP BY reference HAVING count(*) > 1`, [ids.map((id) => `%${id}%`)]);
    expect(entries, 'no ledger entry twice').to.deep.equal([]);
    await expectLedgerSound();
  });
});
