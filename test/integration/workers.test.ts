import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import type { Job } from 'bullmq';
import { getConfig } from '../../shared/config.js';
import { closeQueues, createQueues, type Queues } from '../../shared/queues/producer.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { JOBS, POOLS } from '../../shared/queues/registry.js';
import { poolsFromArgs, startWorkers } from '../../workers/runtime.js';
import { REGISTRY, schedules } from '../../workers/registry.js';
import { deleteKeys, getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';

const silent = pino({ level: 'silent' });

function runWorkerProcess(args: string[], env: Record<string, string> = {}): { exit: Promise<{ code: number | null; stderr: string; stdout: string }>; child: ReturnType<typeof spawn> } {
  // Node itself with tsx's loader, as npm start runs it: the tsx command would relay a signal to the process it starts,
  // and SIGKILL it (exit 143) when it does not acknowledge within 30 ms, which a busy machine's starting worker can miss.
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', OUTBOX_POLL_MS: '100', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdout!.on('data', (d) => (stdout += d));
  const exit = new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => child.on('exit', (code) => resolve({ code, stderr, stdout })));
  return { exit, child };
}

describe('worker pools', () => {
  let queues: Queues;
  before(() => {
    queues = createQueues(createWorkerRedis());
  });
  after(() => closeQueues(queues));

  it('pools come from arguments; all or none means every pool; an unknown pool is refused', () => {
    expect(poolsFromArgs([])).to.deep.equal([...POOLS]);
    expect(poolsFromArgs(['all'])).to.deep.equal([...POOLS]);
    expect(poolsFromArgs(['pricing', 'webhooks', 'pricing'])).to.deep.equal(['pricing', 'webhooks']);
    expect(() => poolsFromArgs(['pricing', 'mining'])).to.throw(/unknown worker pool.*mining/);
  });

  it('repeatable jobs Redis lost (a flush, a new instance, one scheduler) are declared again within seconds, not at the next deploy', async () => {
    const connection = createWorkerRedis();
    const runtime = startWorkers({ pools: ['pricing'], connection, relay: false, deps: { config: getConfig(), ds: await getDs(), queues, log: silent } });
    const declared = async () => (await queues.pricing.getJobSchedulers()).map((s) => s.key);
    try {
      // Every one of the pool's schedules declared, and the check that follows the boot's declaration over.
      const pricing = schedules().filter((s) => JOBS[s.name].queue === 'pricing').map((s) => s.id).sort();
      await until(async () => (await declared()).sort().join() === pricing.join(), { what: 'the pricing schedules declared' });
      await new Promise((r) => setTimeout(r, 300));
      await deleteKeys(`${getConfig().redisPrefix}*`);
      expect(await declared()).to.deep.equal([]);
      await until(async () => (await declared()).includes('engine-sweep'), { what: 'the sweeper declared again', timeoutMs: 8_000 });
      // One scheduler lost and everything else kept (a mark set after declaring would still be there): declared again too.
      await queues.pricing.removeJobScheduler('engine-sweep');
      expect(await declared()).not.to.include('engine-sweep');
      await until(async () => (await declared()).includes('engine-sweep'), { what: 'the lost sweeper declared again', timeoutMs: 8_000 });
    } finally {
      await runtime.shutdown();
      connection.disconnect();
    }
  });

  it('graceful shutdown lets the job in progress finish before it resolves', async () => {
    const ds = await getDs();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    let finished = false;
    const id = `shutdown-${Date.now()}`;
    const runtime = startWorkers({
      pools: ['webhooks'],
      connection: createWorkerRedis(),
      relay: false,
      deps: { config: getConfig(), ds, queues, log: silent },
      registry: {
        ...REGISTRY,
        webhooks: {
          concurrency: 1,
          processors: {
            'outbox.cleanup': async (job: Job) => {
              if (job.id !== id) return 'other'; // jobs other tests left on this queue
              started = true;
              await gate;
              finished = true;
              return 'done';
            },
          },
        },
      },
    });
    await queues.webhooks.add('outbox.cleanup', { olderThanHours: 1 }, { jobId: id });
    expect(await until(() => started, { timeoutMs: 2_000, everyMs: 10, what: 'the job starting' })).to.equal(true);
    let shutDown = false;
    const closing = runtime.shutdown().then(() => (shutDown = true));
    await new Promise((r) => setTimeout(r, 150));
    expect(shutDown, 'shutdown must wait for the running job').to.equal(false);
    release();
    await closing;
    expect(finished).to.equal(true);
    const job = await queues.webhooks.getJob(id);
    expect(await job!.getState()).to.equal('completed');
  });

  it('a worker process started with an unknown pool crashes at boot with a clear message', async () => {
    const { exit } = runWorkerProcess(['mining']);
    const result = await exit;
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.match(/unknown worker pool\(s\): mining/);
  });

  it('a worker process exits cleanly on SIGTERM', async function () {
    this.timeout(30_000);
    const { exit, child } = runWorkerProcess(['webhooks', 'sandbox']);
    // Wait until it says it started.
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    await until(() => out.includes('workers started'), { timeoutMs: 20_000, everyMs: 50, what: 'workers started', describe: () => out.slice(-500) });
    child.kill('SIGTERM');
    const result = await exit;
    expect(result.code).to.equal(0);
    expect(result.stdout).to.include('workers stopped');
  });

  it('a worker process serves /health and, behind the operators\' basic auth, its metrics on WORKER_METRICS_PORT', async function () {
    this.timeout(30_000);
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const { exit, child } = runWorkerProcess(['pricing'], { WORKER_METRICS_PORT: String(port), ADMIN_USER: 'ops', ADMIN_PASSWORD: 'worker-metrics-pass' });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const startedAt = Date.now();
    while (!out.includes('worker health and metrics listening') && Date.now() - startedAt < 20_000) await new Promise((r) => setTimeout(r, 50));
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/health`)).status).to.equal(200);
    expect((await fetch(`${base}/metrics`)).status).to.equal(401);
    const metrics = await fetch(`${base}/metrics`, { headers: { Authorization: `Basic ${Buffer.from('ops:worker-metrics-pass').toString('base64')}` } });
    expect(metrics.status).to.equal(200);
    expect(await metrics.text()).to.match(/rampway_queue_jobs\{queue="pricing",state="waiting"\} \d+/);
    child.kill('SIGTERM');
    expect((await exit).code).to.equal(0);
  });
});
