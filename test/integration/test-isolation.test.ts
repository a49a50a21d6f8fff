import { expect } from 'chai';
import { getConfig } from '../../shared/config.js';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { testRedis } from '../helpers/shared.js';

// The run's prefix as the environment held it when this file was loaded, before any file's hooks ran.
const RUN_PREFIX = process.env.REDIS_PREFIX!;

describe('test isolation: a Redis prefix per test file', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('gives this file a prefix of its own under the run\'s, and the app started here writes under it', async () => {
    const prefix = getConfig().redisPrefix;
    expect(prefix).to.match(new RegExp(`^${RUN_PREFIX}-f\\d+$`));
    expect(api.deps.config.redisPrefix).to.equal(prefix);
    await api.deps.queues.pricing.add('noop-isolation', {} as never, { jobId: 'isolation-probe', delay: 60_000 });
    expect(await testRedis().exists(`${prefix}:pricing:isolation-probe`)).to.equal(1);
    await api.deps.queues.pricing.remove('isolation-probe');
  });
});
