// An on-ramp's fiat steps as a pure decision: its collection (created -> awaiting_funds -> funded, or failed when the
// prompt ends unpaid; a late success still funds it, CONTRACT §14, §18) and its USDC delivery (funded -> processing ->
// completed, or failed with the fiat owed back to the payer). Nothing here reads a database, a queue, a chain or a
// provider: the loader (shared/domain/onramp-moves.ts) reads and locks the row; the chain's delivery is sent between
// two decisions by its own writer.
import type { EventScope } from '../domain/events.js';
import type { LedgerAccount } from '../domain/ledger.js';
import { TRANSACTION_MACHINE, type RefundStatus, type TransactionStatus } from '../domain/machines.js';
import type { ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { nothing, NOW, plan, type Move, type Plan } from './plan.js';
import { refundMove, type RefundState } from './refund-machine.js';
import { onrampAfterUnpaidPrompt, PROMPT_ENDED_CODES } from './stk-results.js';

export interface OnrampSnapshot {
  id: string;
  scope: EventScope;
  status: TransactionStatus;
  stalledAt: TransactionStatus | null;
  providerReference: string | null;
  /** The failure a failed on-ramp shows (a late success funds only one whose prompt ended unpaid). */
  failureCode: string | null;
  /** Whether anything was returned (refund set): a failed on-ramp that was refunded is never funded again. */
  refunded: boolean;
  /** The refund's status as read (refund_status), and the fiat refund a failed delivery owes its payer (fiatRefundOwed). */
  refundStatus: RefundStatus | null;
  refundOwed: RefundState;
  /** What the delivery credits: the USDC amount (minor units), the wallet and its ledger account. */
  delivery: { amount: bigint; walletId: string | null; account: LedgerAccount };
}

export interface OnrampFailure {
  code: string;
  message: string;
}

export type OnrampFact =
  /** The collection request's own answer (onramp.collect): the payer was prompted, unless temporary. */
  | { kind: 'prompt_requested'; outcome: ProviderOutcome }
  /** That answer, once the payer was prompted, said the payer declined (the request's own words). */
  | { kind: 'prompt_refused'; failure: OnrampFailure; providerReference: string | null }
  /** That answer said the payer paid; `deliver` is the delivery job. */
  | { kind: 'prompt_paid'; receipt: string | null; deliver: JobRequest }
  /** The collection job's last attempt failed: the provider needs attention. */
  | { kind: 'collect_unavailable'; reason: string }
  /** The prompt ended unpaid: a (corroborated) result said so, or M-Pesa never named it and its lifetime is over. */
  | { kind: 'collection_unpaid'; failure: OnrampFailure }
  /** The provider gave no result after every status check: the prompt's answer is for an operator to find. */
  | { kind: 'collection_stalled'; failure: OnrampFailure }
  /** A collection's (corroborated) result said the payer paid, whenever it comes; `deliver` is the delivery job. */
  | { kind: 'collection_paid'; receipt: string | null; providerReference: string | null; deliver: JobRequest }
  /** The delivery job starts: funded -> processing (already processing: the send goes on). */
  | { kind: 'delivery_started' }
  /** The USDC is on its way to the wallet (sandbox: recorded; live: mined). */
  | { kind: 'delivered'; hash: string }
  /** The delivery failed for good and no USDC left (its send reverted; sandbox: forced); `pay` pays the fiat back. */
  | { kind: 'delivery_failed'; failure: OnrampFailure; pay: JobRequest };

function move(s: OnrampSnapshot, to: TransactionStatus, set?: Record<string, unknown>, reason?: string): Move {
  return { machine: TRANSACTION_MACHINE, id: s.id, from: s.status, to, ...(set ? { set } : {}), ...(reason ? { reason } : {}) };
}

const unchanged = (s: OnrampSnapshot) => nothing(s.scope, `unchanged (${s.status})`);

/** A late success funds a failed on-ramp only when its prompt ended unpaid and nothing was returned (the machine's guard). */
const fundable = (s: OnrampSnapshot) => s.status === 'awaiting_funds'
  || (s.status === 'failed' && !s.refunded && (PROMPT_ENDED_CODES as readonly string[]).includes(s.failureCode ?? ''));

/** What a fact does to the on-ramp: a fact its status no longer waits for (late, repeated) plans nothing. */
export function decideOnramp(s: OnrampSnapshot, fact: OnrampFact): Plan {
  switch (fact.kind) {
    case 'prompt_requested':
      if (s.status !== 'created') return nothing(s.scope, `not created (${s.status})`);
      if (fact.outcome.status === 'temporary_failure') return nothing(s.scope, 'temporary');
      return plan(s.scope, 'awaiting_funds', { moves: [move(s, 'awaiting_funds', { provider_reference: fact.outcome.provider_reference })] });
    case 'prompt_refused':
      if (s.status !== 'awaiting_funds') return unchanged(s);
      return plan(s.scope, 'failed', { moves: [move(s, 'failed', { failure: fact.failure, provider_reference: fact.providerReference }, 'collection_declined')] });
    case 'prompt_paid':
      if (s.status !== 'awaiting_funds') return unchanged(s);
      return plan(s.scope, 'funded', { moves: [move(s, 'funded', { receipt: fact.receipt })], jobs: [fact.deliver] });
    case 'collect_unavailable': {
      if (s.status !== 'created') return nothing(s.scope, `not created (${s.status})`);
      const failure = { code: 'provider_unavailable', message: `The collection provider did not respond: ${fact.reason}` };
      return plan(s.scope, 'action_required', { moves: [move(s, 'action_required', { stalled_at: 'created', failure }, 'provider_unavailable')] });
    }
    case 'collection_unpaid':
      if (onrampAfterUnpaidPrompt(s.status) !== 'failed') return unchanged(s);
      return plan(s.scope, 'failed', { moves: [move(s, 'failed', { failure: fact.failure }, fact.failure.code)] });
    case 'collection_stalled':
      if (s.status !== 'awaiting_funds') return unchanged(s);
      return plan(s.scope, 'action_required', { moves: [move(s, 'action_required', { stalled_at: 'awaiting_funds', failure: fact.failure }, 'provider_unavailable')] });
    case 'collection_paid': {
      // Stalled in its collection: it resumes waiting, and the same success then funds it (a second decision).
      if (s.status === 'action_required' && (s.stalledAt === 'created' || s.stalledAt === 'awaiting_funds')) {
        return plan(s.scope, 'resumed', { moves: [move(s, 'awaiting_funds', undefined, 'collection_succeeded')] });
      }
      if (!fundable(s)) return unchanged(s);
      const late = s.status === 'failed';
      const set = { receipt: fact.receipt, provider_reference: fact.providerReference ?? s.providerReference, ...(late ? { failure: null } : {}) };
      return plan(s.scope, late ? 'funded (late)' : 'funded', { moves: [move(s, 'funded', set, late ? 'late_collection' : undefined)], jobs: [fact.deliver] });
    }
    case 'delivery_started':
      if (s.status === 'processing') return nothing(s.scope, 'sending');
      if (s.status !== 'funded') return nothing(s.scope, `not funded (${s.status})`);
      return plan(s.scope, 'sending', { moves: [move(s, 'processing')] });
    case 'delivered': {
      if (s.status !== 'processing') return nothing(s.scope, `not processing (${s.status})`);
      const entry = {
        kind: 'onramp_delivery',
        reference: `onramp-delivery-${s.id}`,
        metadata: { transaction_id: s.id, wallet_id: s.delivery.walletId, transaction_hash: fact.hash },
        postings: [
          { account: { kind: 'provider_clearing' as const, asset: 'USDC' }, amount: -s.delivery.amount },
          { account: s.delivery.account, amount: s.delivery.amount },
        ],
      };
      return plan(s.scope, 'completed', {
        moves: [move(s, 'completed', { destination_transaction_hash: fact.hash, completed_at: NOW })], entries: [{ entry }],
      });
    }
    case 'delivery_failed': {
      // Only in its delivery step (or stalled in it): failed, the fiat owed back to the payer (the refund written first,
      // so the `failed` event shows it), its payout staged.
      const step = s.status === 'action_required' ? s.stalledAt : s.status;
      if (step !== 'funded' && step !== 'processing') return unchanged(s);
      const refund = refundMove({ id: s.id, refund_status: s.refundStatus }, s.refundOwed)!;
      return plan(s.scope, 'failed', { moves: [refund, move(s, 'failed', { failure: fact.failure }, fact.failure.code)], jobs: [fact.pay] });
    }
  }
}

