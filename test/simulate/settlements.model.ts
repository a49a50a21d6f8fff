// An off-ramp's settlement played against the kernel's decision (decideSettlement), with the chain and the jobs as
// offramps.ts carries them: transfers of every size (short, exact, over), each log seen again, a managed wallet's own
// send (the watcher seeing it before or after its submission records it), reorgs of counted
// transfers while confirming (a removed transfer mined again later), confirmation jobs late and twice, the chain
// unreadable, the expiry tick early, due and twice, transfers after the settlement closed, the automatic refund and
// the payout ending. The ledger's deposit entries equal what arrived and stayed on the canonical chain; nothing funded
// twice or short; at rest the off-ramp has ended (completed or failed) and its settlement is confirmed or expired.
import { COUNT_NOW, decideSettlement, LATE_EXCESS, LATE_REASON, type SettlementFact, type SettlementSnapshot } from '../../shared/kernel/settlements.js';
import type { SettlementStatus, TransactionStatus } from '../../shared/domain/machines.js';
import { applyInModel, ModelLedger } from './ledger-model.js';
import type { Model } from './runner.js';

const SCOPE = { businessId: 'b', environment: 'live' as const };
const TOTAL = 100n;
const S = 'settlement:s';
const T = 'transaction:t';
const CLEARING = 'settlement_clearing:USDC';
const job = (name: string, id: string) => ({ name, id, data: {} }) as never;

interface Transfer { amount: bigint; canonical: boolean; observation: number }

interface World {
  statuses: Map<string, string>;
  ledger: ModelLedger;
  /** Counted transfers by log (hash:index): what recordTransfer keeps. */
  counted: Map<string, Transfer>;
  /** Logs seen on the chain so far, and countings (a log counted again after a reorg is a new observation). */
  logs: number;
  observations: number;
  /** settlement.confirm jobs staged and not yet run. */
  confirmJobs: number;
  /** expires_at has passed. */
  expiryDue: boolean;
  /** An automatic refund is scheduled (an underpaid or late deposit). */
  refundJob: boolean;
  fundings: number;
  /** A late deposit on a completed off-ramp: its excess returned (scheduleExcessReturn, after apply). */
  excess: boolean;
  /** A managed wallet's off-ramp (the platform sends); its send once mined. */
  managed: boolean;
  sent: boolean;
  /** What a step saw go wrong (checked with the rest). */
  wrong: string[];
}

type Fact =
  | { kind: 'transfer'; amount: bigint }
  | { kind: 'seen_again'; log: string }
  | { kind: 'reorg'; log: string; minedAgain: boolean }
  | { kind: 'confirm'; depth: 'deep' | 'shallow' | 'unknown' }
  | { kind: 'expiry_tick'; due: boolean }
  | { kind: 'refund' }
  | { kind: 'payout_ends' }
  /** A managed wallet's submit job: created -> signing, then the send (mined) recorded: signing -> submitting, observed. */
  | { kind: 'sign' }
  | { kind: 'send_recorded' }
  /** The watcher finds the managed wallet's send on the chain (before or after its submission records it). */
  | { kind: 'watcher_sees_send' };

const settlementStatus = (w: World) => w.statuses.get(S) as SettlementStatus;
const txStatus = (w: World) => w.statuses.get(T) as TransactionStatus;
const received = (w: World) => [...w.counted.values()].reduce((sum, t) => sum + t.amount, 0n);

function snapshot(w: World): SettlementSnapshot {
  const r = received(w);
  return {
    id: 's', scope: SCOPE, status: settlementStatus(w), received: r, totalRequired: TOTAL, receivedShown: String(r), totalRequiredShown: String(TOTAL),
    requiredConfirmations: 12, expiresAt: new Date(w.expiryDue ? 0 : 8.64e15), now: new Date(1), tx: { id: 't', status: txStatus(w), retryCount: 0 },
  };
}

const entry = (kind: string, reference: string, amount: bigint) => ({
  kind, reference, metadata: {},
  postings: [{ account: { kind: 'inbound_clearing' as const, asset: 'USDC' }, amount: -amount }, { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount }],
});

/** Decides `fact` and carries the plan out as apply() does, then what the caller does after it in the same unit. */
function decide(w: World, fact: SettlementFact): string {
  const p = decideSettlement(snapshot(w), fact);
  if (applyInModel(p, w.statuses, w.ledger, (j) => {
    if (j.name === 'settlement.confirm') w.confirmJobs++;
    if (j.name === 'offramp.refund') w.refundJob = true;
  }) === 'stale') w.wrong.push(`stale plan ${p.outcome}`);
  if (p.moves.some((m) => m.to === 'funded')) w.fundings++;
  if (p.moves.some((m) => m.to === 'confirmed') && received(w) < TOTAL) w.wrong.push('confirmed short');
  if (p.outcome === LATE_EXCESS) w.excess = true;
  if (p.outcome === LATE_REASON) w.refundJob = true;
  if (p.outcome === COUNT_NOW) w.wrong.push('the model has no chain at hand');
  return p.outcome;
}

const seenFact = (isNew: boolean, deposit: ReturnType<typeof entry> | null): SettlementFact =>
  ({ kind: 'transfer_counted', isNew, deposit, countNow: false, next: job('settlement.confirm', 'c'), autoRefund: { refund_due_at: new Date(2), job: job('offramp.refund', 'r') } });

function arrive(w: World, log: string, amount: bigint): void {
  const observation = ++w.observations;
  w.counted.set(log, { amount, canonical: true, observation });
  decide(w, seenFact(true, entry('offramp_deposit', `deposit:${log}:${observation}`, amount)));
}

export const settlementsModel: Model<World, Fact> = {
  name: 'off-ramp settlements',
  budget: 14,
  init: (d) => ({
    managed: d.chance(0.3), sent: false,
    statuses: new Map([[S, 'awaiting_transfer'], [T, 'created']]), ledger: new ModelLedger(), counted: new Map(), logs: 0, observations: 0,
    confirmJobs: 0, expiryDue: false, refundJob: false, fundings: 0, excess: false, wrong: [],
  }),
  next(w, d, draining) {
    const confirming = settlementStatus(w) === 'confirming' && txStatus(w) === 'awaiting_funds';
    const options: (() => Fact | null)[] = [
      () => (w.confirmJobs > 0 || (!draining && d.chance(0.2)) ? { kind: 'confirm', depth: draining ? 'deep' : d.pick(['deep', 'shallow', 'unknown'] as const) } : null),
      () => (settlementStatus(w) === 'awaiting_transfer' || !draining ? { kind: 'expiry_tick', due: draining || d.chance(0.5) } : null),
      () => (w.refundJob && txStatus(w) === 'action_required' ? { kind: 'refund' } : null),
      () => (txStatus(w) === 'funded' ? { kind: 'payout_ends' } : null),
      () => (w.managed && txStatus(w) === 'created' && !w.sent ? { kind: 'sign' } : null),
      () => (w.managed && txStatus(w) === 'signing' ? { kind: 'send_recorded' } : null),
      () => (w.managed && w.sent && !w.counted.has('send') ? { kind: 'watcher_sees_send' } : null),
    ];
    if (!draining) {
      options.push(() => ({ kind: 'transfer', amount: d.pick([1n, 40n, 60n, 100n, 140n]) }));
      options.push(() => (w.counted.size ? { kind: 'seen_again', log: d.pick([...w.counted.keys()]) } : null));
      const live = [...w.counted.entries()].filter(([, t]) => t.canonical).map(([log]) => log);
      // A managed wallet's send is mined once: a reorg of it (sent again by its submit step) is not played here.
      if (confirming && live.length && !w.managed) options.push(() => ({ kind: 'reorg', log: d.pick(live), minedAgain: d.chance(0.5) }));
    }
    const offered = draining ? options.map((o) => o()).filter((f): f is Fact => f !== null) : [d.pick(options)()].filter((f): f is Fact => f !== null);
    if (!draining) return offered[0] ?? { kind: 'expiry_tick', due: false };
    // Draining: only what finishes work, a confirmation first (a job staged runs), then the clock.
    // A send in flight first: the expiry waits for it (it never expires a settlement while its send is in flight).
    return offered.find((f) => f.kind === 'confirm' && w.confirmJobs > 0) ?? offered.find((f) => f.kind !== 'confirm' && f.kind !== 'expiry_tick')
      ?? offered.find((f) => f.kind === 'expiry_tick' && settlementStatus(w) === 'awaiting_transfer') ?? null;
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'transfer':
        return arrive(w, `log${++w.logs}`, fact.amount);
      case 'seen_again':
        decide(w, seenFact(false, null));
        return;
      case 'reorg':
        // The chain took it: the next count finds it gone; mined again, it is a new transfer to be found anew.
        w.counted.get(fact.log)!.canonical = false;
        if (fact.minedAgain) w.logs++;
        return;
      case 'confirm': {
        if (w.confirmJobs > 0) w.confirmJobs--;
        // confirmSettlement's own guards, then what the chain shows (recorded before the decision).
        const next = job('settlement.confirm', 'c');
        if (txStatus(w) !== 'awaiting_funds' || settlementStatus(w) !== 'confirming') {
          // A stale job: the count it would make decides nothing.
          const p = decideSettlement(snapshot(w), { kind: 'depth_counted', confirmations: 12, deep: true, next, sweep: null });
          if (p.moves.length || p.jobs.length) w.wrong.push(`a stale count planned ${p.outcome}`);
          return;
        }
        const removed = [...w.counted.entries()].filter(([, t]) => !t.canonical);
        if (removed.length) {
          for (const [log] of removed) w.counted.delete(log);
          const reversals = removed.map(([log, t]) => ({ ...entry('offramp_deposit_reorg', `reversal:${log}:${t.observation}`, -t.amount) }));
          decide(w, { kind: 'reorged', reversals, next, submit: null });
          return;
        }
        if (fact.depth === 'unknown') decide(w, { kind: 'depth_unknown', reason: 'rpc', next });
        else decide(w, { kind: 'depth_counted', confirmations: fact.depth === 'deep' ? 12 : 3, deep: fact.depth === 'deep', next, sweep: null });
        return;
      }
      case 'expiry_tick':
        if (fact.due) w.expiryDue = true;
        decide(w, { kind: 'expiry_tick', autoRefund: { refund_due_at: new Date(2), job: job('offramp.refund', 'r') } });
        return;
      case 'refund':
        // The refund (asked or automatic): action_required -> failed, what arrived returned, its address closed.
        w.refundJob = false;
        w.statuses.set(T, 'failed');
        decide(w, { kind: 'close', reason: 'auto_refund' });
        return;
      case 'sign':
        // Signed and sent: the transfer is on its way whatever the settlement does meanwhile.
        w.statuses.set(T, 'signing');
        w.sent = true;
        return;
      case 'send_recorded':
        // recordSubmission: signing -> submitting, then the transfer observed (the watcher may have counted it first).
        w.statuses.set(T, 'submitting');
        if (w.counted.has('send')) decide(w, seenFact(false, null));
        else arrive(w, 'send', TOTAL);
        return;
      case 'watcher_sees_send':
        arrive(w, 'send', TOTAL);
        return;
      case 'payout_ends':
        w.statuses.set(T, 'completed');
        return;
    }
  },
  check(w, final) {
    const broken = [...w.wrong];
    const canonical = [...w.counted.values()].reduce((sum, t) => sum + t.amount, 0n);
    if (final && w.ledger.balance(CLEARING) !== [...w.counted.values()].filter((t) => t.canonical).reduce((sum, t) => sum + t.amount, 0n)) {
      broken.push(`deposit entries ${w.ledger.balance(CLEARING)} != canonical ${canonical}`);
    }
    if (!final && w.ledger.balance(CLEARING) !== canonical) broken.push(`deposit entries ${w.ledger.balance(CLEARING)} != counted ${canonical}`);
    if (w.fundings > 1) broken.push('funded twice');
    if (w.excess && txStatus(w) !== 'completed') broken.push('an excess returned from an off-ramp not completed');
    if (final) {
      if (!['completed', 'failed'].includes(txStatus(w))) broken.push(`off-ramp at rest in ${txStatus(w)}`);
      if (!['confirmed', 'expired'].includes(settlementStatus(w))) broken.push(`settlement at rest in ${settlementStatus(w)}`);
      if (txStatus(w) === 'failed' && settlementStatus(w) === 'confirmed') broken.push('failed with its settlement confirmed');
    }
    return broken;
  },
  describe: (f) => JSON.stringify(f, (_, v) => (typeof v === 'bigint' ? v.toString() : v)),
};
