// How much of an off-ramp's USDC is still due back, and what the next return is (CONTRACT sections 14 and 18).
// Pure: no database, queue or chain. `refund.amount` counts only what was actually returned (completed sends); a send
// that failed leaves its amount due, and the next send of it is a new one (a reverted send's reference is spent).

/** One return of USDC: `reference` names it (its chain send and ledger entry are `refund-<reference>`), amounts in minor units. */
export interface RefundSend {
  reference: string;
  amount: bigint;
  status: 'pending' | 'completed' | 'failed';
  hash: string | null;
  /** Asked for by the business (POST /refund): a failed one waits for the business, not the sweeper. */
  requested: boolean;
  /** Where it goes (the refund destination when it was decided); a job sending it reads it here. */
  to?: string;
  /**
   * A failed send whose amount a later send took (a send takes all that is due when it is decided, a failed amount
   * with it). A failed send without it is still owed: one that failed while a later send was already in flight.
   */
  resent?: boolean;
}

export interface RefundFunds {
  /** USDC the off-ramp received. */
  received: bigint;
  /** USDC it paid out (total_required once the payout happened). */
  paidOut: bigint;
}

export interface RefundTally {
  /** Completed sends: what `refund.amount` shows once nothing is in flight. */
  returned: bigint;
  /** Sends not yet mined: they may still complete, so they are not due again. */
  inFlight: bigint;
  /** Neither paid out, returned nor on its way back. */
  due: bigint;
}

const sum = (sends: RefundSend[], status: RefundSend['status']) => sends.filter((s) => s.status === status).reduce((t, s) => t + s.amount, 0n);

export function refundTally(funds: RefundFunds, sends: RefundSend[]): RefundTally {
  const returned = sum(sends, 'completed');
  const inFlight = sum(sends, 'pending');
  return { returned, inFlight, due: funds.received - funds.paidOut - returned - inFlight };
}

/**
 * The next send of what is due, or null when nothing is. Its reference is `<id>-<total>` (total: everything
 * returned or on its way back once it is sent), with the attempt number appended when that reference was used before.
 */
export function nextRefundSend(transactionId: string, funds: RefundFunds, sends: RefundSend[], requested: boolean): RefundSend | null {
  const { returned, inFlight, due } = refundTally(funds, sends);
  if (due <= 0n) return null;
  const base = `${transactionId}-${returned + inFlight + due}`;
  const used = sends.filter((s) => s.reference === base || s.reference.startsWith(`${base}-`)).length;
  return { reference: used ? `${base}-${used + 1}` : base, amount: due, status: 'pending', hash: null, requested };
}

/** The sends once `next` (nextRefundSend's) is decided: it carries every failed amount not yet sent again, so those are resent. */
export function withRefundSend(sends: RefundSend[], next: RefundSend): RefundSend[] {
  return [...sends.map((s) => (s.status === 'failed' && !s.resent ? { ...s, resent: true } : s)), next];
}

/** The latest failed send whose amount no later send took: USDC still owed because of it, or undefined. */
function owedByFailure(sends: RefundSend[]): RefundSend | undefined {
  return [...sends].reverse().find((s) => s.status === 'failed' && !s.resent);
}

/** What the chain said of one send: mined (completed, with its hash: the chain's word wins) or never to be mined (failed, when still pending). */
export function settleRefundSend(sends: RefundSend[], reference: string, outcome: { status: 'completed'; hash: string } | { status: 'failed' }): RefundSend[] {
  return sends.map((s) => {
    if (s.reference !== reference || s.status === 'completed') return s;
    if (outcome.status === 'completed') return { ...s, status: 'completed', hash: outcome.hash };
    return s.status === 'pending' ? { ...s, status: 'failed', hash: null } : s;
  });
}

/**
 * The refund as the transaction shows it: pending while a send is in flight (amount: returned plus in flight), failed
 * when nothing is in flight and a failed send no later send took left USDC due (amount: only what was returned), else
 * completed. Not judged by the latest send alone: with two sends in flight (more USDC arrived while a return was on
 * its way), the earlier may fail and the later be mined, and the earlier's amount is still due.
 */
export function refundSummary(funds: RefundFunds, sends: RefundSend[]): { status: RefundSend['status']; amount: bigint; hash: string | null } {
  const { returned, inFlight, due } = refundTally(funds, sends);
  const hash = [...sends].reverse().find((s) => s.status === 'completed')?.hash ?? null;
  if (inFlight > 0n) return { status: 'pending', amount: returned + inFlight, hash };
  return { status: due > 0n && owedByFailure(sends) ? 'failed' : 'completed', amount: returned, hash };
}

/**
 * What a send that did not complete means. A send the chain refused (reverted) or never signed is failed: its amount
 * is due again. One signed and not known to be refused may still be mined: it stays pending (sending again could pay twice).
 */
export function refundSendFate(chainRecord: 'none' | 'sent' | 'mined' | 'reverted' | 'failed'): 'failed' | 'pending' | 'completed' {
  if (chainRecord === 'mined') return 'completed';
  return chainRecord === 'sent' ? 'pending' : 'failed';
}

const RETRY_BASE_MS = 30_000;
const RETRY_MAX_MS = 3_600_000;

/** Backoff before an automatic refund is tried again, after `failures` failed sends: 30 s doubling, at most an hour. */
export function refundRetryDelayMs(failures: number): number {
  const exp = Math.min(Math.max(failures - 1, 0), 20);
  return Math.min(RETRY_BASE_MS * 2 ** exp, RETRY_MAX_MS);
}

/**
 * Whether the refund is tried again on its own (its job after a backoff, the sweeper behind it): USDC is due that a
 * failed send left (no later send took it), and that send was not the business's own (POST /refund: that one waits for the
 * business, perhaps with a new refund_address). Whether or not another send is still in flight: it does not carry the
 * failed amount (a send takes only what is due when it is decided), so nothing is sent twice.
 */
export function retriesOnItsOwn(funds: RefundFunds, sends: RefundSend[]): boolean {
  const failed = owedByFailure(sends);
  return !!failed && !failed.requested && refundTally(funds, sends).due > 0n;
}

/**
 * What a deposit address should hold by our records: what arrived, less what was swept from it, less any refund the
 * hot wallet paid for its USDC beyond what was swept in for it (the hot wallet's own USDC spent: the address then
 * holds USDC the ledger says was returned). Every amount in minor units, summed over the address's payments.
 */
export function depositAddressExpected(a: { received: bigint; sweptOut: bigint; paidOut: bigint; refundedFromHotWallet: bigint }): bigint {
  const cover = a.sweptOut - a.paidOut;
  const uncovered = a.refundedFromHotWallet > cover ? a.refundedFromHotWallet - (cover > 0n ? cover : 0n) : 0n;
  return a.received - a.sweptOut - uncovered;
}
