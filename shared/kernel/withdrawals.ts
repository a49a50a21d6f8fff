// Treasury withdrawals (CONTRACT section 14) as a pure decision: the treasury is debited when the withdrawal is written
// (pending, into the clearing account); a mined send completes it, and a send that cannot happen or reverted fails it
// and gives the amount back to the treasury's available balance. Nothing here reads a database or a chain.
import type { EntryInput, LedgerAccount } from '../domain/ledger.js';
import { TREASURY_WITHDRAWAL_MACHINE, type TreasuryWithdrawalStatus } from '../domain/machines.js';
import type { Chain } from '../domain/chains.js';
import type { EventScope } from '../domain/events.js';
import type { JobRequest } from '../queues/producer.js';
import { nothing, NOW, plan, type Plan } from './plan.js';

export interface WithdrawalSnapshot {
  id: string;
  scope: EventScope;
  status: TreasuryWithdrawalStatus;
  walletId: string;
  chain: Chain;
  /** USDC minor units. */
  amount: bigint;
  transactionHash: string | null;
  /** The hot wallet's send was staged: from then on only its outcome (mined, reverted) decides the withdrawal. */
  sendStaged: boolean;
}

export type WithdrawalFact =
  /** The send's hash once it is certain (sandbox: at once; live: the hot wallet's send was mined). */
  | { kind: 'sent'; hash: string }
  /** The chain refused it for good (the send reverted): nothing left the hot wallet. */
  | { kind: 'reverted'; message: string }
  /** The wallet was archived before anything was sent. */
  | { kind: 'wallet_archived' };

const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const CLEARING: LedgerAccount = { kind: 'settlement_clearing', asset: 'USDC' };

/** The withdrawal's entries: the debit when it is written, then its completion (to the wallet) or failure (back). */
export function withdrawalEntry(w: Pick<WithdrawalSnapshot, 'id' | 'walletId' | 'chain' | 'amount'>, step: TreasuryWithdrawalStatus, hash?: string | null): EntryInput {
  const wallet: LedgerAccount = { kind: 'wallet', walletId: w.walletId, chain: w.chain, asset: 'USDC' };
  const [from, to] = step === 'pending' ? [TREASURY, CLEARING] : step === 'completed' ? [CLEARING, wallet] : [CLEARING, TREASURY];
  return {
    kind: `treasury_withdrawal_${step}`,
    reference: `treasury-withdrawal-${step}-${w.id}`,
    metadata: { withdrawal_id: w.id, wallet_id: w.walletId, ...(hash ? { transaction_hash: hash } : {}) },
    postings: [{ account: from, amount: -w.amount, noOverdraft: from === TREASURY }, { account: to, amount: w.amount }],
  };
}

/** A withdrawal just written (pending): the treasury debited at once (refused there when short) and its send job staged. */
export function withdrawalCreated(w: Pick<WithdrawalSnapshot, 'id' | 'scope' | 'walletId' | 'chain' | 'amount'>, send: JobRequest): Plan {
  return plan(w.scope, 'pending', { entries: [{ entry: withdrawalEntry(w, 'pending'), guarded: true }], jobs: [send] });
}

export function decideWithdrawal(w: WithdrawalSnapshot, fact: WithdrawalFact): Plan {
  if (w.status !== 'pending') {
    // A send mined for a withdrawal already failed back into the treasury would be paid twice: an operator's alarm.
    const conflict = fact.kind === 'sent' && w.status === 'failed' && w.transactionHash !== fact.hash;
    return nothing(w.scope, conflict ? `conflict: sent after failing (${fact.hash})` : `not pending (${w.status})`);
  }
  if (fact.kind === 'sent') {
    return plan(w.scope, 'completed', {
      moves: [{ machine: TREASURY_WITHDRAWAL_MACHINE, id: w.id, from: 'pending', to: 'completed', set: { transaction_hash: fact.hash, completed_at: NOW } }],
      entries: [{ entry: withdrawalEntry(w, 'completed', fact.hash) }],
    });
  }
  if (fact.kind === 'wallet_archived' && w.sendStaged) return nothing(w.scope, 'send in flight: its outcome decides');
  const failure = fact.kind === 'reverted'
    ? { code: 'send_reverted', message: `The transfer reverted on chain, so nothing was sent: ${fact.message}` }
    : { code: 'wallet_archived', message: 'The wallet was archived before the withdrawal was sent; the amount is back in the treasury.' };
  return plan(w.scope, 'failed', {
    moves: [{ machine: TREASURY_WITHDRAWAL_MACHINE, id: w.id, from: 'pending', to: 'failed', set: { failure }, reason: failure.code }],
    entries: [{ entry: withdrawalEntry(w, 'failed') }],
  });
}
