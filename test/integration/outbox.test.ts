import { expect } from 'chai';
import type { Redis } from 'ioredis';
import pino from 'pino';
import type { Job } from 'bullmq';
import { getConfig } from '../../shared/config.js';
import { createQueues, closeQueues, type Queues } from '../../shared/queues/producer.js';
import { createApiRedis, createWorkerRedis } from '../../shared/queues/connections.js';
import { dispatchStaged, flushOutboxMarks, relayOutbox, stageJob } from '../../shared/queues/outbox.js';
import { jobId } from '../../shared/queues/registry.js';
import { startWorkers } from '../../workers/runtime.js';
import { REGISTRY } from '../../workers/registry.js';
import { getDs } from '../helpers/shared.js';
import { startRedisProxy, type RedisProxy } from '../helpers/redis-proxy.js';
import { until } from '../helpers/until.js';

const silent = pino({ level: 'silent' });

describe('outbox: a job that never reached Redis is found in Postgres and enqueued', () => {
  let queues: Queues;
  let proxy: RedisProxy;
  let apiQueues: Queues;
  let apiRedis: Redis;
  before(async () => {
    queues = createQueues(createWorkerRedis());
    // The web process's producer (its fail-fast profile), through a relay the test can cut.
    proxy = await startRedisProxy();
    apiRedis = createApiRedis(proxy.url);
    apiQueues = createQueues(apiRedis);
  });
  after(async () => {
    proxy.resume();
    await closeQueues(queues);
    await closeQueues(apiQueues).catch(() => undefined);
    apiRedis.disconnect();
    await proxy.close();
  });

  it('commit, enqueue fails, the relay enqueues it once, and a worker runs it once', async () => {
    const ds = await getDs();
    const id = jobId('outbox.cleanup', `test-${Date.now()}`);
    const staged = await ds.transaction((em) => stageJob(em, { name: 'outbox.cleanup', id, data: { olderThanHours: 24 * 365 } }));
    // Redis traffic stops between the commit and the enqueue.
    proxy.cut();
    await dispatchStaged(ds, apiQueues, [staged], silent);
    proxy.resume();
    const [row] = await ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE id = $1`, [staged.outboxId]);
    expect(row.dispatched_at).to.equal(null);
    expect(await queues.webhooks.getJob(id)).to.equal(undefined);

    // Within the grace period the relay leaves it alone (the request path may still be dispatching).
    await relayOutbox(ds, queues, silent, { graceMs: 60_000 });
    expect((await ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE id = $1`, [staged.outboxId]))[0].dispatched_at).to.equal(null);
    expect(await queues.webhooks.getJob(id)).to.equal(undefined);

    const seen: string[] = [];
    const runtime = startWorkers({
      pools: ['webhooks'],
      connection: createWorkerRedis(),
      relay: false,
      deps: { config: getConfig(), ds, queues, log: silent },
      registry: {
        ...REGISTRY,
        webhooks: { concurrency: 1, processors: { 'outbox.cleanup': async (job: Job) => void seen.push(job.id!) } },
      },
    });
    try {
      expect(await relayOutbox(ds, queues, silent, { graceMs: 0 })).to.be.at.least(1);
      const [after] = await ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE id = $1`, [staged.outboxId]);
      expect(after.dispatched_at).to.be.instanceOf(Date);
      // A second pass (or a duplicate dispatch) does not enqueue it again.
      await relayOutbox(ds, queues, silent, { graceMs: 0 });
      await dispatchStaged(ds, queues, [staged], silent);
      await until(() => seen.includes(id), { what: 'the relayed job running' });
      await new Promise((r) => setTimeout(r, 200));
      expect(seen.filter((s) => s === id)).to.have.length(1);
    } finally {
      await runtime.shutdown();
    }
  });

  it('the request path marks a dispatched row, so the relay never sees it', async () => {
    const ds = await getDs();
    const id = jobId('outbox.cleanup', `fast-${Date.now()}`);
    const staged = await ds.transaction((em) => stageJob(em, { name: 'outbox.cleanup', id, data: { olderThanHours: 24 * 365 } }));
    await dispatchStaged(ds, queues, [staged], silent);
    expect(await queues.webhooks.getJob(id)).to.not.equal(undefined);
    const dispatched = await until(async () => (await ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE id = $1`, [staged.outboxId]))[0].dispatched_at, {
      // Marks are written every 250 ms (MARK_EVERY_MS): the rest is room for a loaded machine.
      timeoutMs: 3_000, everyMs: 10, what: 'the row marked dispatched',
    });
    expect(dispatched).to.be.instanceOf(Date);
  });

  it('the marks of many units committed together are written in one statement, not one each', async () => {
    const ds = await getDs();
    const units = await Promise.all(Array.from({ length: 20 }, (_, i) => {
      const id = jobId('outbox.cleanup', `batch-${Date.now()}-${i}`);
      return ds.transaction((em) => stageJob(em, { name: 'outbox.cleanup', id, data: { olderThanHours: 24 * 365 } }));
    }));
    const marks: string[] = [];
    const query = ds.query.bind(ds);
    // Watches the statements the process sends (the database itself is the real one).
    ds.query = ((sql: string, params?: unknown[]) => {
      if (sql.startsWith('UPDATE outbox_jobs SET dispatched_at')) marks.push(sql);
      return query(sql, params);
    }) as typeof ds.query;
    try {
      await Promise.all(units.map((staged) => dispatchStaged(ds, queues, [staged], silent)));
      await flushOutboxMarks(ds);
    } finally {
      ds.query = query;
    }
    expect(marks).to.have.length(1);
    const rows = await ds.query(`SELECT count(*)::int AS n FROM outbox_jobs WHERE id = ANY($1) AND dispatched_at IS NOT NULL`, [units.map((u) => u.outboxId)]);
    expect(rows[0].n).to.equal(20);
    for (const u of units) await queues.webhooks.remove(u.job.id);
  });

  it('a row the queue refuses backs off and never holds back the rows behind it', async () => {
    const ds = await getDs();
    const stamp = Date.now();
    // Older than the good row: a job name this release does not know (written by a newer one), and an id BullMQ refuses.
    const poison = await ds.query(
      `INSERT INTO outbox_jobs (queue, job_name, job_id, payload, created_at) VALUES
         ('webhooks', 'future.job', $1, '{}', now() - interval '1 minute'),
         ('webhooks', 'outbox.cleanup', $2, '{"olderThanHours": 8760}', now() - interval '1 minute') RETURNING id`,
      [`future-${stamp}`, `bad:${stamp}`],
    );
    const goodId = jobId('outbox.cleanup', `behind-${stamp}`);
    const good = await ds.transaction((em) => stageJob(em, { name: 'outbox.cleanup', id: goodId, data: { olderThanHours: 24 * 365 } }));
    try {
      await relayOutbox(ds, queues, silent, { graceMs: 0, batch: 5000 });
      expect(await queues.webhooks.getJob(goodId)).to.not.equal(undefined);
      const rows = await ds.query(`SELECT attempts, last_error, next_attempt_at > now() AS waiting, dispatched_at FROM outbox_jobs WHERE id = ANY($1) ORDER BY id`, [poison.map((r: { id: string }) => r.id)]);
      expect(rows.map((r: { attempts: number; waiting: boolean; dispatched_at: Date | null }) => [r.attempts, r.waiting, r.dispatched_at])).to.deep.equal([[1, true, null], [1, true, null]]);
      expect(rows[0].last_error).to.match(/unknown job name future\.job/);
      expect(rows[1].last_error).to.match(/:/);
      // Waiting out its backoff, a refused row is not tried again on the next pass.
      await relayOutbox(ds, queues, silent, { graceMs: 0, batch: 5000 });
      const again = await ds.query(`SELECT attempts FROM outbox_jobs WHERE id = ANY($1)`, [poison.map((r: { id: string }) => r.id)]);
      expect(again.map((r: { attempts: number }) => r.attempts)).to.deep.equal([1, 1]);
    } finally {
      // Leave no undispatchable rows for the other tests' relays.
      await ds.query(`UPDATE outbox_jobs SET dispatched_at = now() WHERE id = ANY($1) OR id = $2`, [poison.map((r: { id: string }) => r.id), good.outboxId]);
    }
  });

  it('re-enqueues a delayed job with what is left of its delay, not the whole delay again', async () => {
    const ds = await getDs();
    const id = jobId('outbox.cleanup', `delayed-${Date.now()}`);
    await ds.query(
      `INSERT INTO outbox_jobs (queue, job_name, job_id, payload, delay_ms, created_at) VALUES ('webhooks', 'outbox.cleanup', $1, '{"olderThanHours": 8760}', 60000, now() - interval '45 seconds')`,
      [id],
    );
    await relayOutbox(ds, queues, silent, { graceMs: 0, batch: 5000 });
    const job = await queues.webhooks.getJob(id);
    expect(job).to.not.equal(undefined);
    expect(job!.opts.delay).to.be.within(10_000, 15_500);
    await job!.remove();
  });

  it('job ids never hold a colon (BullMQ refuses them) or an empty part', () => {
    expect(jobId('outbox.cleanup', 'a', 'b')).to.equal('outbox-cleanup-a-b');
    expect(() => jobId('outbox.cleanup', 'a:b')).to.throw(/':'/);
    expect(() => jobId('outbox.cleanup', '')).to.throw(/non-empty/);
  });

  it('with Redis unreachable, a relay pass gives up quickly, records the error and holds no transaction open', async function () {
    this.timeout(15_000);
    const ds = await getDs();
    const id = jobId('outbox.cleanup', `down-${Date.now()}`);
    const staged = await ds.transaction((em) => stageJob(em, { name: 'outbox.cleanup', id, data: { olderThanHours: 24 * 365 } }));
    // The workers' patient profile: it would wait for Redis forever.
    const patient = createWorkerRedis('redis://127.0.0.1:1');
    const stuckQueues = createQueues(patient);
    try {
      const started = Date.now();
      await relayOutbox(ds, stuckQueues, silent, { graceMs: 0, batch: 5000 });
      expect(Date.now() - started).to.be.below(5000);
      const idle = await ds.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`);
      expect(idle[0].n).to.equal(0);
      // Some row of this pass failed (the oldest first); ours is still waiting for the next pass.
      const [row] = await ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE id = $1`, [staged.outboxId]);
      expect(row.dispatched_at).to.equal(null);
      const failed = await ds.query(`SELECT count(*)::int AS n FROM outbox_jobs WHERE dispatched_at IS NULL AND last_error LIKE '%within%'`);
      expect(failed[0].n).to.be.at.least(1);
    } finally {
      await closeQueues(stuckQueues).catch(() => undefined);
      patient.disconnect();
      await relayOutbox(ds, queues, silent, { graceMs: 0, batch: 5000 }); // leave nothing for other tests
    }
  });
});
