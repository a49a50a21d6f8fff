import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { getConfig } from '../../shared/config.js';
import { withLease } from '../../shared/queues/lease.js';
import { testRedis } from '../helpers/shared.js';
import { until } from '../helpers/until.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The chain scan's lease (shared/queues/lease.ts): held as long as its holder works, and no longer than one lease
// once the holder is gone.
describe('a lease: renewed while its work runs, lapsing soon after its holder dies', () => {
  const key = () => `${getConfig().redisPrefix}:lease-test:${randomUUID()}`;

  it('work longer than the lease keeps it (renewed), and no second holder runs meanwhile; released at the end', async () => {
    const k = key();
    let second: { ran: boolean } | null = null;
    const first = withLease(testRedis(), k, 300, async () => {
      await sleep(400);
      second = await withLease(testRedis(), k, 300, async () => 'twice');
      await sleep(500);
      return 'once';
    });
    expect(await first).to.deep.equal({ ran: true, value: 'once' });
    expect(second).to.deep.equal({ ran: false });
    expect(await testRedis().exists(k)).to.equal(0);
    expect(await withLease(testRedis(), k, 300, async () => 'next')).to.deep.equal({ ran: true, value: 'next' });
  });

  it('a holder SIGKILLed in the middle of its work holds the lease for one lease at most', async () => {
    const k = key();
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', `
      import { Redis } from 'ioredis';
      import { withLease } from './shared/queues/lease.ts';
      const redis = new Redis(${JSON.stringify(getConfig().redisUrl)});
      await withLease(redis, ${JSON.stringify(k)}, 1000, async () => { console.log('holding'); await new Promise(() => undefined); });
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout!.on('data', (d) => String(d).includes('holding') && resolve()));
    await sleep(1500); // past one lease: still held, by its renewals
    expect(await testRedis().exists(k)).to.equal(1);
    const killed = Date.now();
    child.kill('SIGKILL');
    await until(async () => (await testRedis().exists(k)) === 0, { timeoutMs: 3000, everyMs: 50, what: 'the dead holder\'s lease lapsing' });
    expect(Date.now() - killed).to.be.below(1300);
  });
});
