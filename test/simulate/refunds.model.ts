// Returns of an off-ramp's USDC played against the kernel's refund rules (refund-due.ts): the business asks (twice, at
// once, with a new address), the sweeper retries failed automatic returns, the chain mines, reverts or never signs
// each send, and its answers come late and twice; more USDC arrives after a return, and its return is sent while the
// earlier one is still in flight (two sends in flight, either failing first). Nothing is returned twice,
// refund.amount is what the chain returned, what is still due always has a way back, and every change of the refund's
// status is a move REFUND_MACHINE allows (as apply() asserts it).
import { nextRefundSend, refundSendFate, refundSummary, refundTally, retriesOnItsOwn, settleRefundSend, withRefundSend, type RefundSend } from '../../shared/kernel/refund-due.js';
import type { RefundStatus } from '../../shared/domain/machines.js';
import { assertPlan, KernelInvariantError } from '../../shared/kernel/invariants.js';
import { plan } from '../../shared/kernel/plan.js';
import { refundMove } from '../../shared/kernel/refund-machine.js';
import type { Dice, Model } from './runner.js';

interface World {
  funds: { received: bigint; paidOut: bigint };
  sends: RefundSend[];
  /** The chain's record of each send by reference: what it did with it. */
  chain: Map<string, 'sent' | 'mined' | 'reverted' | 'none'>;
  /** USDC the chain actually returned. */
  returnedOnChain: bigint;
  /** The refund's status as stored (refund_status), and every change of it REFUND_MACHINE refused. */
  status: RefundStatus | null;
  refused: string[];
  /** An arrival's return is due: the offramp.refund job runs it (as the sweeper's retry does). */
  returnDue: boolean;
}

type Fact =
  | { kind: 'business_asks' }
  | { kind: 'sweeper' }
  | { kind: 'chain'; reference: string; does: 'mined' | 'reverted' | 'none' }
  | { kind: 'answer'; reference: string }
  /** The send's job gave up (its last attempt) while the chain may hold it signed and not yet mined. */
  | { kind: 'job_gives_up'; reference: string }
  /** More USDC reached the deposit address (a late deposit, an excess): its return falls due (the offramp.refund job). */
  | { kind: 'more_arrives'; amount: bigint };

function startSend(w: World, requested: boolean): void {
  const send = nextRefundSend('tx', w.funds, w.sends, requested);
  if (!send) return;
  if (w.sends.some((s) => s.reference === send.reference)) throw new Error(`reference ${send.reference} used twice`);
  w.sends = withRefundSend(w.sends, send);
  w.chain.set(send.reference, 'sent');
}

/** What one fact does to the refund's sends and the chain. */
function stepSends(w: World, fact: Fact): void {
  switch (fact.kind) {
    case 'business_asks':
      // POST /refund: the unit locks the transaction and sends what is due (not what is in flight), if anything.
      startSend(w, true);
      return;
    case 'sweeper':
      // The offramp.refund job (returnHeldFunds): what is due goes, whether or not an earlier send is still in flight.
      startSend(w, false);
      w.returnDue = false;
      return;
    case 'more_arrives':
      w.funds = { ...w.funds, received: w.funds.received + fact.amount };
      w.returnDue = true;
      return;
    case 'chain':
      w.chain.set(fact.reference, fact.does);
      if (fact.does === 'mined') w.returnedOnChain += w.sends.find((s) => s.reference === fact.reference)!.amount;
      return;
    case 'answer':
    case 'job_gives_up': {
      const fate = refundSendFate(w.chain.get(fact.reference)!);
      if (fate === 'pending') return;
      w.sends = settleRefundSend(w.sends, fact.reference, fate === 'completed' ? { status: 'completed', hash: `0x${fact.reference}` } : { status: 'failed' });
    }
  }
}

export const refundsModel: Model<World, Fact> = {
  name: 'off-ramp refunds',
  budget: 30,
  init(d: Dice) {
    const received = BigInt(1 + d.int(50_000_000));
    const paidOut = d.chance(0.5) ? 0n : BigInt(d.int(Number(received)));
    return { funds: { received, paidOut }, sends: [], chain: new Map(), returnedOnChain: 0n, status: null, refused: [], returnDue: false };
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    if (!draining) options.push(() => ({ kind: 'business_asks' }));
    if (retriesOnItsOwn(w.funds, w.sends) || w.returnDue || (!w.sends.length && draining)) options.push(() => ({ kind: 'sweeper' }));
    if (!draining && d.chance(0.1)) options.push(() => ({ kind: 'more_arrives', amount: BigInt(1 + d.int(5_000_000)) }));
    const sent = [...w.chain].filter(([, s]) => s === 'sent');
    if (sent.length) options.push(() => ({ kind: 'chain', reference: d.pick(sent)[0], does: d.pick(['mined', 'mined', 'reverted', 'none'] as const) }));
    const settled = [...w.chain].filter(([ref, s]) => s !== 'sent' && (w.sends.find((x) => x.reference === ref)?.status === 'pending' || !draining));
    if (settled.length) options.push(() => ({ kind: 'answer', reference: d.pick(settled)[0] }));
    if (!draining && sent.length) options.push(() => ({ kind: 'job_gives_up', reference: d.pick(sent)[0] }));
    return options.length ? d.pick(options)() : null;
  },
  step(w, fact) {
    stepSends(w, fact);
    // The status its sends add up to, recorded as the code records it: one compare-and-set the machine must allow.
    if (!w.sends.length) return;
    const summary = refundSummary(w.funds, w.sends);
    const move = refundMove({ id: 'tx', refund_status: w.status }, { status: summary.status, amount: summary.amount.toString(), transaction_hash: summary.hash });
    try {
      assertPlan(plan({ businessId: 'b', environment: 'live' }, 'refund', { moves: move ? [move] : [] }));
      w.status = summary.status;
    } catch (err) {
      if (!(err instanceof KernelInvariantError)) throw err;
      w.refused.push(`refund ${w.status ?? 'none'} -> ${summary.status} refused by REFUND_MACHINE (${err.invariant})`);
    }
  },
  check(w, final) {
    const broken: string[] = [...w.refused];
    const owed = w.funds.received - w.funds.paidOut;
    if (w.returnedOnChain > owed) broken.push(`returned ${w.returnedOnChain} on chain, more than the ${owed} owed`);
    const summary = refundSummary(w.funds, w.sends);
    const tally = refundTally(w.funds, w.sends);
    if (tally.returned > w.returnedOnChain) broken.push('refund.amount counts USDC the chain never returned');
    if (tally.due < 0n) broken.push(`due is negative: ${tally.due}`);
    if (final) {
      if (tally.inFlight > 0n) broken.push('a send still in flight at quiescence');
      if (summary.amount !== w.returnedOnChain) broken.push(`refund.amount ${summary.amount} != returned on chain ${w.returnedOnChain}`);
      // What is still due must have a way out: the sweeper's retry, or the business's POST /refund after its own failed.
      const lastFailed = [...w.sends].reverse().find((s) => s.status === 'failed' && !s.resent);
      if (tally.due > 0n && w.sends.length && !retriesOnItsOwn(w.funds, w.sends) && !lastFailed?.requested) broken.push(`${tally.due} due with nothing to move it`);
      // And the refund says so: never completed while USDC a send failed to return is still due.
      if (tally.due > 0n && lastFailed && w.status === 'completed') broken.push(`refund completed with ${tally.due} still due`);
    }
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  },
};
