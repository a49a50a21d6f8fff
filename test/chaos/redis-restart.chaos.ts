import { expect } from 'chai';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.js';
import { expectEachPaidOnce, startOfframps, startService, untilEnded, type Service } from './service.js';

// Redis restarted empty (as a platform's Redis without persistence comes back after a restart) while off-ramps are
// under way: queues, schedules, rate limits and locks all gone at once. The service's own Redis, on a spare port.
describe('chaos: Redis restarted empty while lifecycles are in flight', function () {
  this.timeout(300_000);
  let redis: OwnRedis;
  let service: Service;
  before(async () => {
    redis = await startOwnRedis();
    // Slow steps, so the restart lands in the middle of the lifecycles; a lost job's step is re-driven after 5 s.
    service = await startService({ REDIS_URL: redis.url, SANDBOX_STEP_MS: '300', SWEEPER_STALE_SECONDS: '5' });
  });
  after(async () => {
    await service?.stop();
    await redis?.stop();
  });

  it('every off-ramp ends completed and none is paid twice; the schedulers come back by themselves', async () => {
    const key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
    const ids = await startOfframps(service, key, 20);
    const [{ n: inFlight }] = await (await getDs()).query(`SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1) AND status NOT IN ('completed', 'failed', 'action_required')`, [ids]);
    const lost = await redis.restartEmpty();
    console.log(`      Redis restarted empty: ${lost} keys lost, ${inFlight} of ${ids.length} off-ramps under way`);
    expect(inFlight, 'off-ramps under way at the restart').to.be.greaterThan(0);
    expect(await untilEnded(ids, 240_000)).to.deep.equal({ completed: ids.length });
    await expectEachPaidOnce(ids);
    await expectLedgerSound();
  });
});
