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

/** What the chain said of one send: mined (completed, with its hash: the chain's word wins) or never to be mined (failed, when still pending). */
export function settleRefundSend(sends: RefundSend[], reference: string, outcome: { status: 'completed'; hash: string } | { status: 'failed' }): RefundSend[] {
  return sends.map((s) => {
    if (s.reference !== reference || s.status === 'completed') return s;
    if (outcome.status === 'completed') return { ...s, status: 'completed', hash: outcome.hash };
    return s.status === 'pending' ? { ...s, status: 'failed', hash: null } : s;
  });
}

/**
 * The refund as the transaction shows it: pending while a send is in flight (amount: returned plus in flight),
 * failed when the latest send failed (amount: only what was returned), else completed.
 */
export function refundSummary(sends: RefundSend[]): { status: RefundSend['status']; amount: bigint; hash: string | null } {
  const returned = sum(sends, 'completed');
  const inFlight = sum(sends, 'pending');
  const latest = sends[sends.length - 1];
  const hash = [...sends].reverse().find((s) => s.status === 'completed')?.hash ?? null;
  if (inFlight > 0n) return { status: 'pending', amount: returned + inFlight, hash };
  return { status: latest?.status === 'failed' ? 'failed' : 'completed', amount: returned, hash };
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

/** Whether the sweeper tries the refund again: the latest send failed and the business did not ask for it itself. */
export function retriesOnItsOwn(sends: RefundSend[]): boolean {
  const latest = sends[sends.length - 1];
  return latest?.status === 'failed' && !latest.requested;
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
