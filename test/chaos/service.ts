// The service as the Procfile runs it, for fault tests: a web process and a worker process (every pool), each a real
// child process the test can kill, with its database and Redis optionally behind relays the test can cut.
import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { freePort, startProcess, stopProcess, type Started } from '../helpers/processes.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { loadConfig } from '../../shared/config.js';

/** As npm start hands them out: the web process gets the seeds' public keys, never the seeds (CONTRACT 15). */
export function webEnv(env: Record<string, string>): Record<string, string> {
  const { wallets } = loadConfig(env, { walletSeeds: true });
  const { WALLET_SEED: _sandbox, WALLET_SEED_LIVE: _live, ...rest } = env;
  const keys = (suffix: string, wallet: typeof wallets.sandbox | null): Record<string, string> =>
    wallet ? { [`WALLET_XPUB${suffix}`]: wallet.xpub, [`WALLET_TREASURY_ADDRESS${suffix}`]: wallet.treasuryAddress } : {};
  return { ...rest, ...keys('', wallets.sandbox), ...keys('_LIVE', wallets.live) };
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, any>;
}

export interface Service {
  base: string;
  call(key: string, method: string, path: string, body?: object, idempotencyKey?: string): Promise<Answer>;
  /** SIGKILL the worker process (no drain, no goodbye), and start a new one. */
  killWorkers(): Promise<void>;
  startWorkers(): Promise<void>;
  /** The web process's pid and the worker process's (while it runs). */
  pids(): { web: number; workers: number | null };
  stop(): Promise<void>;
}

export { freePort };

/** Calls the business API at `base` with a key: writes get a fresh Idempotency-Key unless one is given. */
export function clientFor(base: string): Service['call'] {
  return async (key, method, path, body, idempotencyKey = randomUUID()) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}), ...(method === 'GET' ? {} : { 'Idempotency-Key': idempotencyKey }) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
  };
}

export async function startService(overrides: Record<string, string> = {}, options: { logDir?: string } = {}): Promise<Service> {
  const port = await freePort();
  // Children log at info so their readiness lines show; stdout keeps draining so logging never blocks them.
  const env = { ...(process.env as Record<string, string>), LOG_LEVEL: 'info', SANDBOX_STEP_MS: '20', OUTBOX_POLL_MS: '200', ...overrides, PORT: String(port) };
  // `logDir` keeps each process's log (web.log, workers.log) for a run a person has to read afterwards.
  const { logDir } = options;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const logOf = (name: string) => (logDir ? path.join(logDir, `${name}.log`) : undefined);
  const web = await startProcess('api/main.ts', webEnv(env), 'web listening', [], { logFile: logOf('web') });
  let workers: Started | null = await startProcess('workers/main.ts', env, 'workers started', [], { logFile: logOf('workers') });
  const base = `http://127.0.0.1:${port}/api/v1/business`;
  return {
    base,
    call: clientFor(base),
    async killWorkers() {
      if (!workers) return;
      const exited = new Promise((resolve) => workers!.child.once('exit', resolve));
      workers.child.kill('SIGKILL');
      await exited;
      workers = null;
    },
    async startWorkers() {
      workers ??= await startProcess('workers/main.ts', env, 'workers started', [], { logFile: logOf('workers') });
    },
    pids: () => ({ web: web.child.pid!, workers: workers?.child.pid ?? null }),
    async stop() {
      if (workers) await stopProcess(workers);
      await stopProcess(web);
    },
  };
}

/** `count` sandbox off-ramps from managed wallets (one funded wallet per ten), `width` created at a time. */
export async function startOfframps(service: Service, key: string, count: number, width = 8): Promise<string[]> {
  const ok = (a: Answer, what: string) => {
    if (a.status >= 300) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body;
  };
  const beneficiary = ok(await service.call(key, 'POST', '/beneficiaries', {
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Chaos Payee', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
  }), 'beneficiary');
  const wallets: string[] = [];
  for (let i = 0; i < Math.ceil(count / 10); i++) {
    const customer = ok(await service.call(key, 'POST', '/customers', { external_reference: `chaos-${randomUUID()}` }), 'customer');
    ok(await service.call(key, 'POST', `/sandbox/wallets/${customer.wallet.id}/fund`, { chain: 'base', amount: '300' }), 'fund');
    wallets.push(customer.wallet.id);
  }
  const ids: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    for (let i = next++; i < count; i = next++) {
      let quote = ok(await service.call(key, 'POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '20', beneficiary_id: beneficiary.id }), 'quote');
      // 202 pending while the pricing pool is away (a killed worker): priced once it is back.
      if (quote.status === 'pending') {
        quote = await until(async () => {
          const q = (await service.call(key, 'GET', `/quotes/${quote.id}`)).body;
          return q.status !== 'pending' && q;
        }, { timeoutMs: 60_000, everyMs: 250, what: `quote ${quote.id} priced` });
      }
      ids.push(ok(await service.call(key, 'POST', '/offramps', { quote_id: quote.id, funding_source: { wallet_id: wallets[i % wallets.length] } }), 'offramp').id);
    }
  }));
  return ids;
}

/** Waits until every transaction has ended; answers how many of each final status. */
export async function untilEnded(ids: string[], timeoutMs = 120_000): Promise<Record<string, number>> {
  const ds = await getDs();
  let counts: Record<string, number> = {};
  await until(async () => {
    const rows: { status: string; n: number }[] = await ds.query(`SELECT status, count(*)::int AS n FROM transactions WHERE id = ANY($1) GROUP BY status`, [ids]);
    counts = Object.fromEntries(rows.map((r) => [r.status, r.n]));
    return ['completed', 'failed', 'action_required'].reduce((n, s) => n + (counts[s] ?? 0), 0) === ids.length;
  }, { timeoutMs, everyMs: 250, what: `${ids.length} lifecycles ending`, describe: () => counts });
  return counts;
}

/** Each transaction's payout was asked of the provider exactly once: none missing, none twice. */
export async function expectEachPaidOnce(ids: string[]): Promise<void> {
  const evaluations = await payoutEvaluations(ids);
  expect(evaluations).to.have.length(ids.length);
  expect(evaluations.every((n) => n === 1), JSON.stringify(evaluations)).to.equal(true);
}

/** Payouts the provider was asked for, per transaction: more than one evaluation would be a payout twice. */
export async function payoutEvaluations(ids: string[]): Promise<number[]> {
  const rows: { evaluations: number }[] = await (await getDs()).query(`SELECT evaluations FROM provider_requests WHERE kind = 'payout' AND reference = ANY($1)`, [ids]);
  return rows.map((r) => r.evaluations);
}
