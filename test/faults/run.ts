// One fault run: the plan's lifecycles started at their moments while its faults land, then faults off and the
// service driven to quiescence (workers restarted as after any outage, retries and sweeper given time, the exits
// an operator would take on action_required), then every invariant read.
import type { Queue } from 'bullmq';
import { getDs } from '../helpers/shared.js';
import { jobForStep } from '../../shared/domain/lifecycle-jobs.js';
import { closeQueues, createQueues, type Queues } from '../../shared/queues/producer.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { JOBS } from '../../shared/queues/registry.js';
import { drive, newPayers, type Lifecycle } from './lifecycles.js';
import { INVARIANTS, chainDrifts, gatherTransfers, type Facts, type Verdict } from './invariants.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { describePlan, makePlan, type FaultEvent, type Plan } from './schedule.js';
import { CONFIRMATIONS, startWorld, type World } from './world.js';

export interface RunReport {
  plan: Plan;
  lives: Lifecycle[];
  verdicts: Verdict[];
  injected: Record<string, number>;
  notes: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function fire(world: World, event: FaultEvent, notes: string[], injected: Record<string, number>): Promise<void> {
  const bump = (k: string) => (injected[k] = (injected[k] ?? 0) + 1);
  switch (event.kind) {
    case 'reorg': {
      // Snapshot, let `depth` blocks come, revert, and grow a longer chain without them.
      const request = (method: string, params: unknown[] = []) => world.anvil.publicClient.request({ method: method as never, params: params as never });
      const { id, from } = await world.withoutMiner(async () => ({ id: await request('evm_snapshot'), from: await world.anvil.publicClient.getBlockNumber({ cacheTime: 0 }) }));
      // Blocks come from the miner and from every mined transaction: revert as soon as `depth` are there.
      const waitUntil = Date.now() + 3000;
      while (Date.now() < waitUntil && (await world.anvil.publicClient.getBlockNumber({ cacheTime: 0 })) - from < BigInt(event.depth)) await sleep(40);
      await world.withoutMiner(async () => {
        const head = await world.anvil.publicClient.getBlockNumber({ cacheTime: 0 });
        // Never deeper than the configured confirmations promise: that would be the harness's fault.
        if (head - from >= BigInt(CONFIRMATIONS)) {
          notes.push(`reorg at ${event.at} skipped: ${head - from} blocks came (deeper than ${CONFIRMATIONS - 1})`);
          return;
        }
        await request('evm_revert', [id]);
        await request('anvil_mine', [`0x${(Number(head - from) + 1).toString(16)}`]);
        bump(`reorg(depth ${head - from})`);
      });
      break;
    }
    case 'redis_flush':
      notes.push(`redis flush deleted ${await world.flushRedis()} keys`);
      bump('redis_flush');
      break;
    case 'kill_workers':
      await world.service.killWorkers();
      await world.service.startWorkers();
      bump('worker_sigkill');
      break;
    case 'rpc_outage':
      world.rpc.outage(event.ms);
      bump('rpc_outage');
      break;
    case 'daraja_outage':
      world.daraja.outage(event.ms);
      bump('daraja_outage');
      break;
    case 'momo_outage':
      world.momo.outage(event.ms);
      bump('momo_outage');
      break;
  }
}

/** Moving: anything the service has still to do on its own. */
async function moving(world: World, lives: Lifecycle[]): Promise<{ moving: string[]; signature: string }> {
  const ds = await getDs();
  // USDC on the chain at a deposit address of the run that its settlement has not counted yet (a late transfer the
  // watcher is still to see): the service has work to do, even when its transaction already ended.
  const settlements: { id: string; to_address: string; received: string }[] = await ds.query(
    `SELECT s.id::text, lower(s.to_address) AS to_address, s.received_amount::text AS received FROM settlements s WHERE s.transaction_id = ANY($1)`, [lives.flatMap((l) => l.transactions)]);
  const onChain = new Map<string, bigint>();
  for (const x of await gatherTransfers(world)) onChain.set(x.to, (onChain.get(x.to) ?? 0n) + x.value);
  const uncounted = settlements.filter((st) => (onChain.get(st.to_address) ?? 0n) > toMinor(st.received, USDC_SCALE));
  const txs: { id: string; status: string; refund: string | null }[] = await ds.query(
    `SELECT id::text, status, refund_status AS refund FROM transactions WHERE id = ANY($1) ORDER BY id`, [lives.flatMap((l) => l.transactions)]);
  const intents: { id: string; status: string; payout_status: string | null }[] = await ds.query(
    `SELECT id::text, status, payout_status FROM payment_intents WHERE id = ANY($1) ORDER BY id`, [lives.flatMap((l) => l.intents)]);
  const deposits: { id: string; status: string }[] = await ds.query(
    `SELECT id::text, status FROM treasury_deposits WHERE payment_intent_id = ANY($1) ORDER BY id`, [lives.flatMap((l) => l.intents)]);
  const withdrawals: { id: string; status: string }[] = await ds.query(
    `SELECT id::text, status FROM treasury_withdrawals WHERE id = ANY($1) ORDER BY id`, [lives.flatMap((l) => l.withdrawals)]);
  const sends: { n: number }[] = await ds.query(`SELECT count(*)::int AS n FROM chain_sends WHERE environment = 'live' AND status = 'sent'`);
  const ended = ['completed', 'failed', 'action_required'];
  const still = [
    ...txs.filter((t) => !ended.includes(t.status) || t.refund === 'pending').map((t) => `${t.id}:${t.status}${t.refund ? `/refund ${t.refund}` : ''}`),
    ...intents.filter((i) => i.status === 'processing' || i.payout_status === 'pending' || i.payout_status === 'processing').map((i) => `intent ${i.id}:${i.status}/${i.payout_status}`),
    ...deposits.filter((d) => d.status === 'pending').map((d) => `deposit ${d.id}`),
    ...withdrawals.filter((w) => w.status === 'pending').map((w) => `withdrawal ${w.id}`),
    ...(sends[0].n ? [`${sends[0].n} chain sends unmined`] : []),
    ...uncounted.map((st) => `settlement ${st.id}: a transfer on chain not counted yet`),
  ];
  return { moving: still, signature: JSON.stringify([txs, intents, deposits, withdrawals]) };
}

/** Waits until nothing moves and nothing changed for `quietMs`, or `timeoutMs` passes (what still moves is then stuck). */
async function quiesce(world: World, lives: Lifecycle[], timeoutMs: number, quietMs = 6000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  let since = Date.now();
  for (;;) {
    const seen = await moving(world, lives);
    if (seen.signature !== last) {
      last = seen.signature;
      since = Date.now();
    }
    if (!seen.moving.length && Date.now() - since >= quietMs) return [];
    if (Date.now() > deadline) return seen.moving;
    await sleep(1000);
  }
}

/** The run's queues on a connection of their own, closed when `read` is done. */
async function withQueues<T>(read: (queues: Queues) => Promise<T>): Promise<T> {
  const redis = createWorkerRedis();
  const queues = createQueues(redis);
  try {
    return await read(queues);
  } finally {
    await closeQueues(queues);
    redis.disconnect();
  }
}

/**
 * A job as BullMQ holds it: its state, attempts, stalls, when its last attempt started, its last delay (a retry's
 * backoff, counted from that attempt's failure; BullMQ keeps no next-run time on the job), its last failure.
 */
async function jobSeen(queue: Queue, id: string): Promise<string> {
  const [job, state] = await Promise.all([queue.getJob(id), queue.getJobState(id)]);
  const when = (ms?: number) => (ms ? new Date(ms).toISOString() : '-');
  return `job ${id} ${state}` + (job
    ? ` (attempts ${job.attemptsMade}/${job.opts.attempts}, stalled ${job.stalledCounter}, processed ${when(job.processedOn)}, finished ${when(job.finishedOn)}, last delay ${job.delay ?? 0} ms, ${job.failedReason ?? 'no failure'})`
    : '');
}

/**
 * For each transaction still short of an end: the job that should move it on (the sweeper's map) as BullMQ holds it,
 * with the provider request's last answer: what a person needs to see where it waits.
 */
async function stepJobStates(lives: Lifecycle[]): Promise<string[]> {
  const rows: (Parameters<typeof jobForStep>[0] & { status: string; updated_at: Date; outcome: unknown; request_at: Date | null })[] = await (await getDs()).query(
    `SELECT t.id::text, t.retry_count, t.environment, t.direction, t.status, t.funding_type, t.updated_at, jsonb_build_object('status', p.status, 'provider_reference', p.provider_reference, 'failure', p.failure) AS outcome, p.updated_at AS request_at
       FROM transactions t LEFT JOIN provider_requests p ON p.reference = t.id::text AND p.environment = t.environment
      WHERE t.id = ANY($1) AND t.status NOT IN ('completed', 'failed', 'action_required')`, [lives.flatMap((l) => l.transactions)]);
  if (!rows.length) return [];
  return withQueues((queues) => Promise.all(rows.map(async (t) => {
    const request = jobForStep(t, t.status, 0, 0);
    const seen = request ? await jobSeen(queues[JOBS[request.name].queue], request.id) : 'job none';
    return `${t.id} ${t.status} since ${t.updated_at.toISOString()}: ${seen}; provider request ${JSON.stringify(t.outcome)} at ${t.request_at?.toISOString() ?? '-'}`;
  })));
}

/**
 * For each refund of the run still pending (its transaction ended or not): the chain.send job of each send it waits
 * on, as BullMQ holds it, and the send as recorded: where a refund waits (a delayed retry, a lost job, a send unmined).
 */
async function refundSendStates(lives: Lifecycle[]): Promise<string[]> {
  const rows: { id: string; status: string; job_id: string; reference: string; send: string | null; hash: string | null }[] = await (await getDs()).query(
    `SELECT t.id::text, t.status, o.job_id, o.payload->>'reference' AS reference, c.status AS send, c.transaction_hash AS hash
       FROM transactions t JOIN outbox_jobs o ON o.job_name = 'chain.send' AND o.payload->>'purpose' = 'refund' AND o.payload->>'transactionId' = t.id::text
       LEFT JOIN chain_sends c ON c.environment = o.environment AND c.chain = o.payload->>'chain' AND c.reference = o.payload->>'reference'
      WHERE t.id = ANY($1) AND t.refund_status = 'pending' ORDER BY t.id, o.id`, [lives.flatMap((l) => l.transactions)]);
  if (!rows.length) return [];
  return withQueues((queues) => Promise.all(rows.map(async (r) =>
    `${r.id} ${r.status}, refund pending: send ${r.reference} ${r.send ?? 'not recorded'}${r.hash ? ` (${r.hash})` : ''}; ${await jobSeen(queues.settlement, r.job_id)}`)));
}

/** The exits an operator takes on a transaction left in action_required: retry, else refund. */
async function operateExits(world: World, lives: Lifecycle[], exits: Map<string, string[]>): Promise<number> {
  const ds = await getDs();
  // The run's transactions and the payouts its intents started (a business retries those too: payout_transaction_id).
  const stalled: { id: string; environment: string }[] = await ds.query(
    `SELECT id::text, environment FROM transactions WHERE status = 'action_required'
        AND (id = ANY($1) OR id IN (SELECT payout_transaction_id FROM payment_intents WHERE id = ANY($2)))`,
    [lives.flatMap((l) => l.transactions), lives.flatMap((l) => l.intents)]);
  for (const t of stalled) {
    const key = t.environment === 'live' ? world.liveKey : world.sandboxKey;
    const tried = exits.get(t.id) ?? [];
    const retry = await world.call(key, 'POST', `/transactions/${t.id}/retry`);
    tried.push(`retry ${retry.status}`);
    if (retry.status !== 202) {
      const refund = await world.call(key, 'POST', `/transactions/${t.id}/refund`, {});
      tried.push(`refund ${refund.status}${refund.status === 409 ? ` ${refund.body.error?.details?.reason ?? refund.body.error?.code}` : ''}`);
    }
    exits.set(t.id, tried);
  }
  return stalled.length;
}

export async function runFaults(seed: number, options: { lifecycles: number; faultMs: number; quiesceMs: number; exitMs: number; log: (line: string) => void }): Promise<RunReport> {
  const plan = makePlan(seed, { lifecycles: options.lifecycles, faultMs: options.faultMs, confirmations: CONFIRMATIONS });
  options.log(describePlan(plan));
  const runStarted = new Date();
  newPayers();
  const world = await startWorld(plan);
  const notes: string[] = [];
  const injected: Record<string, number> = {};
  try {
    // A standing intent keeps the watcher scanning (managed wallets' outside funding is recorded only while it scans).
    const keeper = await world.call(world.liveKey, 'POST', '/payment-intents', { amount: { currency: 'KES', value: '1000' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' }, expires_in_seconds: 3600 });
    if (keeper.status !== 201) notes.push(`keeper intent: ${keeper.status}`);
    await sleep(1500);
    const hotDriftAtStart = (await chainDrifts(world)).find((d) => d.kind === 'treasury')?.drift ?? 0n;
    const started = Date.now();
    const driving = plan.lifecycles.map(async (l) => {
      await sleep(l.at);
      return drive(world, l.kind, l.n);
    });
    const firing = (async () => {
      for (const event of plan.events) {
        await sleep(Math.max(0, started + event.at - Date.now()));
        await fire(world, event, notes, injected).catch((err) => notes.push(`${event.kind} at ${event.at} failed: ${err instanceof Error ? err.message : err}`));
      }
    })();
    const lives = await Promise.all(driving);
    await firing;
    await sleep(Math.max(0, started + plan.faultMs - Date.now()));
    // Faults end as outages do; held callbacks are delivered; workers come back fresh (a Redis flush took their schedules).
    world.rpc.active = false;
    world.daraja.active = false;
    world.momo.active = false;
    await Promise.all([world.daraja.flush(), world.momo.flush()]);
    await world.service.killWorkers();
    await world.service.startWorkers();
    const exits = new Map<string, string[]>();
    let stuck = await quiesce(world, lives, options.quiesceMs);
    // Then the operator: every action_required is offered its exit, and each exit gets its own time to work.
    // (A late deposit can turn a failed transaction into action_required after quiescence: a third round catches it.)
    for (let round = 0; round < 3; round++) {
      if (!(await operateExits(world, lives, exits))) break;
      stuck = await quiesce(world, lives, options.exitMs);
    }
    if (stuck.length) notes.push(`still moving at the end of quiescence: ${stuck.slice(0, 8).join('; ')}`);
    for (const line of [...await stepJobStates(lives), ...await refundSendStates(lives)]) notes.push(line);
    // Sends left unmined, beside what the chain says of their senders' nonces: what a person needs to see why.
    const unmined: Record<string, any>[] = await (await getDs()).query(
      `SELECT purpose, from_address, nonce, status, broadcasts, cardinality(replaced_hashes) AS resigned, updated_at FROM chain_sends
        WHERE environment = 'live' AND status = 'sent' ORDER BY from_address, nonce LIMIT 12`);
    for (const u of unmined) {
      const latest = await world.anvil.publicClient.getTransactionCount({ address: u.from_address, blockTag: 'latest' }).catch(() => -1);
      const pending = await world.anvil.publicClient.getTransactionCount({ address: u.from_address, blockTag: 'pending' }).catch(() => -1);
      notes.push(`unmined send: ${u.purpose} from ${u.from_address} nonce ${u.nonce} (chain nonce latest ${latest}, pending ${pending}), broadcast ${u.broadcasts}x, re-signed ${u.resigned}x, last touched ${u.updated_at.toISOString()}`);
    }
    for (const l of lives.filter((x) => x.error)) notes.push(`lifecycle ${l.n} ${l.kind} not driven as planned: ${l.error}`);
    const drawn = lives.filter((l) => l.codes.length).map((l) => `${l.n} ${l.kind}: ${l.codes.join(', ')}`);
    if (drawn.length) notes.push(`published codes drawn: ${drawn.join('; ')}`);
    for (const [k, v] of Object.entries(world.rpc.injected)) if (v) injected[`rpc ${k}`] = v;
    for (const [k, v] of Object.entries(world.daraja.injected)) if (v) injected[`daraja ${k}`] = v;
    for (const [k, v] of Object.entries(world.momo.injected)) if (v) injected[`momo ${k}`] = v;
    const facts: Facts = { world, lives, runStarted, transfers: await gatherTransfers(world), exits, hotDriftAtStart };
    const verdicts: Verdict[] = [];
    for (const check of INVARIANTS) verdicts.push(await check(facts));
    return { plan, lives, verdicts, injected, notes };
  } finally {
    await world.close();
  }
}

export function printReport(report: RunReport, log: (line: string) => void): void {
  log(`seed ${report.plan.seed}: replay with FAULT_SEED=${report.plan.seed} npm run test:faults`);
  log(`faults injected: ${Object.entries(report.injected).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`);
  for (const note of report.notes) log(`note: ${note}`);
  report.verdicts.forEach((v, i) => {
    log(`${i + 1}. ${v.held ? 'HELD    ' : 'VIOLATED'} ${v.name} (${v.checked} checked)`);
    for (const e of v.examples.slice(0, 6)) log(`     - ${e}`);
    if (v.examples.length > 6) log(`     ... and ${v.examples.length - 6} more`);
  });
}
