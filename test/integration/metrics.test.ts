// Prometheus metrics and transaction ids in logs, while a sandbox off-ramp runs through the web process and every pool.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { startService, type RunningService } from '../helpers/service.js';
import { captureLogs } from '../helpers/log-capture.js';
import { getConfig } from '../../shared/config.js';
import { serveWorkerMetrics } from '../../workers/metrics-server.js';
import { operatorFailures } from '../../api/middleware/basic-auth.js';
import { quickstart } from '../../examples/quickstart.js';

const ADMIN = { ADMIN_USER: 'ops', ADMIN_PASSWORD: 'metrics-test-password' };
const basic = `Basic ${Buffer.from(`${ADMIN.ADMIN_USER}:${ADMIN.ADMIN_PASSWORD}`).toString('base64')}`;

/** The value of one series in Prometheus text format (0 when absent). */
function value(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('metrics and transaction ids in logs', function () {
  this.timeout(60_000);
  let service: RunningService;
  let workerMetrics: Server;
  let baseUrl: string;
  let workerUrl: string;
  const webLogs = captureLogs('debug');
  const poolLogs = captureLogs('debug');

  before(async () => {
    const env = { ...ADMIN, REDIS_PREFIX: `${getConfig().redisPrefix}-metrics` };
    service = await startService({ env, log: webLogs.log });
    // Jobs read their pool's logger at run time.
    service.pools.deps.log = poolLogs.log;
    baseUrl = service.baseUrl;
    const failures = operatorFailures(service.api.deps.scripts, service.api.deps.config.redisPrefix);
    workerMetrics = await serveWorkerMetrics({ port: 0, host: '127.0.0.1', user: ADMIN.ADMIN_USER, password: ADMIN.ADMIN_PASSWORD, queues: service.pools.deps.queues, log: poolLogs.log, failures });
    workerUrl = `http://127.0.0.1:${(workerMetrics.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((resolve) => workerMetrics.close(() => resolve()));
    await service?.close();
  });

  const scrape = async (url: string) => {
    const res = await fetch(`${url}/metrics`, { headers: { Authorization: basic } });
    expect(res.status).to.equal(200);
    return res.text();
  };

  it('are behind the operators\' basic auth, on the web port and on the worker\'s own port', async () => {
    for (const url of [baseUrl, workerUrl]) {
      expect((await fetch(`${url}/metrics`)).status).to.equal(401);
      expect((await fetch(`${url}/metrics`, { headers: { Authorization: `Basic ${Buffer.from('ops:wrong').toString('base64')}` } })).status).to.equal(401);
    }
    expect((await fetch(`${workerUrl}/health`)).status).to.equal(200);
  });

  it('move with a sandbox off-ramp: requests by route template and status, jobs per queue, provider calls, queue depth', async () => {
    const before = await scrape(baseUrl);
    const apiKey = (await makeKey((await makeBusiness()).businessId, { environment: 'sandbox' })).key;
    const tx = await quickstart({ baseUrl, apiKey, log: () => {} });
    expect(tx.status).to.equal('completed');
    const after = await scrape(baseUrl);

    const http = 'rampway_http_request_duration_seconds_count';
    const offramps = { method: 'POST', route: '/api/v1/business/offramps', status: '201' };
    expect(value(after, http, offramps) - value(before, http, offramps)).to.equal(1);
    // Polling reads one route template, whatever the id: a single series.
    const polls = { method: 'GET', route: '/api/v1/business/transactions/{id}', status: '200' };
    expect(value(after, http, polls)).to.be.greaterThan(value(before, http, polls));
    expect(after).to.not.include(tx.id);
    expect(value(after, 'rampway_http_request_duration_seconds_bucket', { ...offramps, le: '+Inf' })).to.equal(value(after, http, offramps));

    const jobs = 'rampway_job_duration_seconds_count';
    for (const [queue, job] of [['pricing', 'quote.price'], ['settlement', 'offramp.submit'], ['providers', 'payout.send']]) {
      const labels = { queue: queue!, job: job!, outcome: 'completed' };
      expect(value(after, jobs, labels) - value(before, jobs, labels), `${queue} ${job}`).to.be.greaterThan(0);
    }
    const payouts = { provider: 'sandbox', operation: 'payout' };
    const calls = (text: string) => text.split('\n').filter((l) => l.startsWith('rampway_provider_request_duration_seconds_count{') && l.includes('operation="payout"')).reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    expect(calls(after) - calls(before), JSON.stringify(payouts)).to.be.greaterThan(0);
    for (const queue of ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks']) expect(after).to.match(new RegExp(`rampway_queue_jobs\\{queue="${queue}",state="waiting"\\} \\d+`));

    // The worker's port serves the same process-wide registry here (one process in the test; one per worker in production).
    expect(await scrape(workerUrl)).to.include('rampway_job_duration_seconds_count');
  });

  it('name the transaction on every log line about it, in the web process and in the pools', async () => {
    const apiKey = (await makeKey((await makeBusiness()).businessId, { environment: 'sandbox' })).key;
    const tx = await quickstart({ baseUrl, apiKey, log: () => {} });
    const parse = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const web = parse(webLogs.lines()).filter((l) => String(l.path ?? '').includes(tx.id) || l.transactionId === tx.id);
    expect(web.some((l) => l.method === 'POST' && l.path === '/api/v1/business/offramps' && l.transactionId === tx.id), 'the creating request').to.equal(true);
    for (const l of web) expect(l.transactionId, JSON.stringify(l)).to.equal(tx.id);
    const jobsLines = parse(poolLogs.lines()).filter((l) => String(l.jobId ?? '').includes(tx.id));
    expect(jobsLines.length, 'the pools logged about it').to.be.greaterThan(2);
    for (const l of jobsLines) expect(l.transactionId, JSON.stringify(l)).to.equal(tx.id);
  });
});
