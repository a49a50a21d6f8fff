// State machines as data: per resource, its statuses and which status each may move to. The one transition
// function (transition.ts) reads these; nothing else writes a status.
import { PROMPT_ENDED_CODES } from '../kernel/stk-results.js';

export const TRANSACTION_STATUSES = ['created', 'awaiting_funds', 'funded', 'signing', 'submitting', 'processing', 'action_required', 'completed', 'failed'] as const;
export type TransactionStatus = (typeof TRANSACTION_STATUSES)[number];

export const SETTLEMENT_STATUSES = ['awaiting_transfer', 'confirming', 'confirmed', 'expired', 'underpaid'] as const;
export type SettlementStatus = (typeof SETTLEMENT_STATUSES)[number];

export const QUOTE_STATUSES = ['pending', 'available', 'consumed', 'expired', 'failed'] as const;
export type QuoteStatus = (typeof QUOTE_STATUSES)[number];

export const PAYMENT_INTENT_STATUSES = ['awaiting_payment', 'processing', 'completed', 'cancelled', 'expired'] as const;
export type PaymentIntentStatus = (typeof PAYMENT_INTENT_STATUSES)[number];

export const TREASURY_DEPOSIT_STATUSES = ['pending', 'confirmed', 'failed'] as const;
export type TreasuryDepositStatus = (typeof TREASURY_DEPOSIT_STATUSES)[number];

export const TREASURY_WITHDRAWAL_STATUSES = ['pending', 'completed', 'failed'] as const;
export type TreasuryWithdrawalStatus = (typeof TREASURY_WITHDRAWAL_STATUSES)[number];

export const PAYOUT_STATUSES = ['pending', 'processing', 'completed', 'failed'] as const;
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];

export const PAYOUT_BATCH_STATUSES = ['processing', 'completed'] as const;
export type PayoutBatchStatus = (typeof PAYOUT_BATCH_STATUSES)[number];

export const OWNERSHIP_STATUSES = ['managed', 'unverified', 'verified'] as const;
export type OwnershipStatus = (typeof OWNERSHIP_STATUSES)[number];

export interface Machine<S extends string = string> {
  /** Names the resource in history rows and event types (`transaction.completed`). */
  resource: 'transaction' | 'settlement' | 'quote' | 'wallet' | 'beneficiary' | 'payment_intent' | 'treasury_deposit' | 'treasury_withdrawal' | 'webhook_endpoint' | 'webhook_message' | 'liquidation_address' | 'payout_batch'
    | 'chain_send' | 'chain_inflow' | 'provider_request' | 'refund';
  /**
   * A platform record (the chain's sends and inflows, a provider request): no business scope, a bigint id, no history row or event; its
   * moves are compare-and-sets all the same (moveRecord, transition.ts).
   */
  platform?: true;
  /**
   * A status kept on another resource's row (a transaction's refund): null while there is none, then created in one of
   * `initial`; no history row or event of its own (its owner announces the change). Moved by moveRecord(), a
   * compare-and-set; a "move" to the status it is in rewrites only its other columns, still from the status read.
   */
  embedded?: { initial: readonly S[] };
  table: string;
  column: string;
  /** from -> the statuses it may move to. A status with no entry is terminal. */
  moves: Readonly<Partial<Record<S, readonly S[]>>>;
  /** Statuses whose arrival is announced as an event; the others are recorded in history only. */
  announced: readonly S[];
  /**
   * Conditions for leaving a status toward `to` for `reason`: SQL over the row's columns (qualified by `t`), checked
   * in the transition's conditional UPDATE, so no caller can make a move the machine forbids, whatever it read.
   */
  guards?: Readonly<Partial<Record<S, (to: string, t: string, reason: string | undefined) => string | null>>>;
  /** For the guide's diagram: what a move means (`from->to`), and notes on a status (the ways out of it that keep it). */
  labels?: Readonly<Record<string, string>>;
  notes?: Readonly<Partial<Record<S, string>>>;
}

// CONTRACT section 7. Backwards only: action_required -> the step it stalled in (retry), awaiting_funds -> created (a reorg).
export const TRANSACTION_MACHINE: Machine<TransactionStatus> = {
  resource: 'transaction',
  table: 'transactions',
  column: 'status',
  moves: {
    // A treasury-funded payout is funded when it is created (the treasury is debited at once).
    created: ['signing', 'awaiting_funds', 'funded', 'action_required', 'failed'],
    signing: ['submitting', 'action_required', 'failed'],
    submitting: ['awaiting_funds', 'action_required', 'failed'],
    awaiting_funds: ['funded', 'created', 'action_required', 'failed'],
    funded: ['processing', 'action_required', 'failed'],
    processing: ['completed', 'action_required', 'failed'],
    action_required: ['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'failed'],
    // A transfer that arrives after its settlement expired reopens the failed off-ramp for the business to decide.
    failed: ['action_required', 'funded'],
  },
  announced: TRANSACTION_STATUSES,
  guards: {
    // Back only to the step it stalled in (retry), on to awaiting_funds (the payment arrived), or to failed.
    action_required: (to, t) => (to === 'failed' || to === 'awaiting_funds' ? null : `${t}.stalled_at = '${to}'`),
    // Reopened only by money that arrived after it failed (a late deposit, for the business to have refunded), never
    // to be retried: a stale job's move to action_required is refused. A corroborated late success funds an on-ramp
    // whose prompt ended unpaid (CONTRACT §14, §18). Anything else only while nothing was returned.
    failed: (to, t, reason) => (to === 'action_required' ? (reason === 'late_deposit' ? null : 'false')
      : to === 'funded' ? `${t}.refund IS NULL AND ${t}.direction = 'onramp' AND ${t}.failure->>'code' IN (${PROMPT_ENDED_CODES.map((c) => `'${c}'`).join(', ')})`
        : `${t}.refund IS NULL`),
  },
  // Every way out of a stuck state (CONTRACT section 14).
  labels: {
    'awaiting_funds->created': 'reorg',
    ...Object.fromEntries((['created', 'signing', 'submitting', 'funded', 'processing'] as const).map((s) => [`action_required->${s}`, 'retry'])),
    'action_required->awaiting_funds': 'paid in full',
    'action_required->failed': 'refund (requested or automatic)',
    'failed->action_required': 'late deposit',
    'failed->funded': 'late M-Pesa success (on-ramp)',
  },
  notes: {
    completed: 'USDC above total_required is returned (refund)',
    failed: 'USDC still held is returned (refund)',
  },
};

export const SETTLEMENT_MACHINE: Machine<SettlementStatus> = {
  resource: 'settlement',
  table: 'settlements',
  column: 'status',
  moves: {
    awaiting_transfer: ['confirming', 'confirmed', 'expired', 'underpaid'],
    // `expired` from confirming or underpaid: the transaction failed, and its deposit address is closed.
    confirming: ['confirmed', 'awaiting_transfer', 'expired'],
    // More can still arrive: a top-up of an underpaid settlement, a transfer to an expired address.
    underpaid: ['confirming', 'confirmed', 'expired'],
    expired: ['confirming', 'confirmed'],
  },
  announced: SETTLEMENT_STATUSES,
};

export const QUOTE_MACHINE: Machine<QuoteStatus> = {
  resource: 'quote',
  table: 'quotes',
  column: 'status',
  moves: {
    pending: ['available', 'failed', 'expired'],
    available: ['consumed', 'expired'],
  },
  announced: ['available'],
};

// CONTRACT section 8. A failed collection returns the intent to awaiting_payment; a payment seen while it is being
// processed may still be overtaken by the expiry only if it came to nothing (processing -> expired).
export const PAYMENT_INTENT_MACHINE: Machine<PaymentIntentStatus> = {
  resource: 'payment_intent',
  table: 'payment_intents',
  column: 'status',
  moves: {
    awaiting_payment: ['processing', 'cancelled', 'expired'],
    processing: ['awaiting_payment', 'completed', 'expired'],
  },
  announced: PAYMENT_INTENT_STATUSES,
};

export const TREASURY_DEPOSIT_MACHINE: Machine<TreasuryDepositStatus> = {
  resource: 'treasury_deposit',
  table: 'treasury_deposits',
  column: 'status',
  moves: { pending: ['confirmed', 'failed'] },
  announced: TREASURY_DEPOSIT_STATUSES,
};

/** CONTRACT section 14: the treasury is debited at pending; completed (sent) or failed (the amount back in the treasury). */
export const TREASURY_WITHDRAWAL_MACHINE: Machine<TreasuryWithdrawalStatus> = {
  resource: 'treasury_withdrawal',
  table: 'treasury_withdrawals',
  column: 'status',
  moves: { pending: ['completed', 'failed'] },
  announced: TREASURY_WITHDRAWAL_STATUSES,
};

/** CONTRACT section 16: a payout batch is processing until every item (a transaction) is completed or failed. */
export const PAYOUT_BATCH_MACHINE: Machine<PayoutBatchStatus> = {
  resource: 'payout_batch',
  table: 'payout_batches',
  column: 'status',
  moves: { processing: ['completed'] },
  announced: ['completed'],
};

/** An intent's automatic payout (settlement.payout_status): recorded in history; its transaction announces each step. */
export const INTENT_PAYOUT_MACHINE: Machine<PayoutStatus> = {
  resource: 'payment_intent',
  table: 'payment_intents',
  column: 'payout_status',
  moves: { pending: ['processing', 'failed'], processing: ['completed', 'failed'] },
  announced: [],
};

export const WEBHOOK_ENDPOINT_STATUSES = ['enabled', 'failing', 'disabled', 'deleted'] as const;
export type WebhookEndpointStatus = (typeof WEBHOOK_ENDPOINT_STATUSES)[number];

/** A webhook endpoint: `failing` after a whole retry schedule without success, back at the next success; 410 disables it. */
export const WEBHOOK_ENDPOINT_MACHINE: Machine<WebhookEndpointStatus> = {
  resource: 'webhook_endpoint',
  table: 'webhook_endpoints',
  column: 'status',
  moves: { enabled: ['failing', 'disabled', 'deleted'], failing: ['enabled', 'disabled', 'deleted'], disabled: ['deleted'] },
  announced: [],
};

export const WEBHOOK_MESSAGE_STATUSES = ['pending', 'delivered', 'failed', 'cancelled'] as const;
export type WebhookMessageStatus = (typeof WEBHOOK_MESSAGE_STATUSES)[number];

/** One event for one endpoint. A redelivery starts a new round from any status, a pending one included. */
export const WEBHOOK_MESSAGE_MACHINE: Machine<WebhookMessageStatus> = {
  resource: 'webhook_message',
  table: 'webhook_messages',
  column: 'status',
  moves: { pending: ['delivered', 'failed', 'cancelled', 'pending'], delivered: ['pending'], failed: ['pending'], cancelled: ['pending'] },
  announced: [],
};

export const WALLET_OWNERSHIP_MACHINE: Machine<OwnershipStatus> = {
  resource: 'wallet',
  table: 'wallets',
  column: 'ownership_status',
  moves: { unverified: ['verified'] },
  announced: ['verified'],
};

export type RecordStatus = 'active' | 'archived';

/** Wallets and beneficiaries are archived once, for good (DELETE); no event type is defined for it. */
export const WALLET_STATUS_MACHINE: Machine<RecordStatus> = { resource: 'wallet', table: 'wallets', column: 'status', moves: { active: ['archived'] }, announced: [] };
export const BENEFICIARY_STATUS_MACHINE: Machine<RecordStatus> = {
  resource: 'beneficiary', table: 'beneficiaries', column: 'status', moves: { active: ['archived'] }, announced: [],
};

/** A liquidation address is archived once, for good; transfers that still arrive go back to their senders. */
export const LIQUIDATION_ADDRESS_MACHINE: Machine<RecordStatus> = {
  resource: 'liquidation_address', table: 'liquidation_addresses', column: 'status', moves: { active: ['archived'] }, announced: [],
};

export const CHAIN_SEND_STATUSES = ['planned', 'sent', 'mined', 'reverted', 'failed'] as const;
export type ChainSendStatus = (typeof CHAIN_SEND_STATUSES)[number];

/**
 * A send from one of our addresses (shared/chain/sender.ts): planned (recorded by the deciding unit, not signed), sent
 * (signed and broadcast), then its receipt decides: mined or reverted. A reorg that takes a mined send's block makes it
 * sent again (broadcast again with its own bytes); a send mined again after that may still revert.
 */
export const CHAIN_SEND_MACHINE: Machine<ChainSendStatus> = {
  resource: 'chain_send', table: 'chain_sends', column: 'status', platform: true, announced: [],
  moves: { planned: ['sent'], sent: ['mined', 'reverted'], mined: ['sent', 'reverted'] },
};

export const CHAIN_INFLOW_STATUSES = ['pending', 'credited', 'reorged'] as const;
export type ChainInflowStatus = (typeof CHAIN_INFLOW_STATUSES)[number];

/**
 * USDC that reached one of our addresses from outside (shared/domain/wallet-inflows.ts): pending until deep enough
 * (credited) or taken by a reorg (reorged); a reorged one mined again is pending again, in its new block.
 */
export const CHAIN_INFLOW_MACHINE: Machine<ChainInflowStatus> = {
  resource: 'chain_inflow', table: 'chain_inflows', column: 'status', platform: true, announced: [],
  moves: { pending: ['credited', 'reorged'], reorged: ['pending'] },
};

export const PROVIDER_REQUEST_STATUSES = ['sending', 'pending', 'succeeded', 'declined', 'rejected', 'temporary_failure'] as const;
export type ProviderRequestStatus = (typeof PROVIDER_REQUEST_STATUSES)[number];

const NOT_FINAL = ['sending', 'pending', 'temporary_failure'] as const;
const ANSWERS = ['pending', 'succeeded', 'declined', 'rejected', 'temporary_failure'] as const;

/**
 * A request to a fiat provider (provider_requests; its answer's other facts in typed columns beside `status`), moved by
 * the decisions of shared/kernel/provider-records.ts. Created `sending` before it leaves (a live adapter's claim), or
 * with the sandbox's own answer. The moves the code makes:
 * - sending -> any answer: the provider's answer to the request that left (store), a status query's, a callback's.
 * - pending or temporary_failure -> any answer (a pending one included): a later answer about the same request.
 * - sending, pending or temporary_failure -> sending: a new send (markSending); sending -> sending, a send whose
 *   answer was lost sent again under the `sends` it read.
 * - succeeded, declined or rejected: final, never overwritten by an answer, except:
 *   -> sending, only when the provider said the request ended without moving money (`ended`, markSending's rule;
 *      the guard holds it in the UPDATE);
 *   declined or rejected -> succeeded: a collection's success credited after its prompt ended unpaid (CONTRACT §14).
 * The sandbox evaluates a temporary failure again (temporary_failure -> its new answer), and no other.
 */
export const PROVIDER_REQUEST_MACHINE: Machine<ProviderRequestStatus> = {
  resource: 'provider_request', table: 'provider_requests', column: 'status', platform: true, announced: [],
  moves: {
    sending: ['sending', ...ANSWERS],
    pending: ['sending', ...ANSWERS],
    temporary_failure: ['sending', ...ANSWERS],
    succeeded: ['sending'],
    declined: ['sending', 'succeeded'],
    rejected: ['sending', 'succeeded'],
  },
  // A final answer goes again only once the provider said the request ended without moving money; an on-ramp's fiat
  // refund refused for good goes again too (CONTRACT §18: sent until paid), never an off-ramp's refused payout (its
  // USDC went back).
  guards: {
    succeeded: (to: string, t: string) => (to === 'sending' ? `${t}.ended` : null),
    declined: (to: string, t: string) => (to === 'sending' ? `${t}.ended` : null),
    rejected: (to: string, t: string) => (to === 'sending' ? `(${t}.ended OR (${t}.kind = 'payout' AND ${t}.answer IS DISTINCT FROM 'paid'
      AND EXISTS (SELECT 1 FROM transactions o WHERE o.id::text = ${t}.reference AND o.environment = ${t}.environment AND o.direction = 'onramp')))` : null),
  },
};

/** A provider request's statuses that are not its provider's last word: an answer may still replace them. */
export const PROVIDER_REQUEST_OPEN: readonly ProviderRequestStatus[] = NOT_FINAL;

export const REFUND_STATUSES = ['pending', 'completed', 'failed'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

/**
 * A transaction's refund (CONTRACT sections 14 and 18; transactions.refund_status, its amounts and sends in
 * transactions.refund): decided in shared/kernel/refund-moves.ts. It starts pending (a live send of USDC, an on-ramp's
 * fiat payout) or completed (done at once: the sandbox's send, a treasury payout's amount back in the treasury). A
 * status never left for good: what is still due keeps a way out (CONTRACT section 18).
 */
export const REFUND_MACHINE: Machine<RefundStatus> = {
  resource: 'refund', table: 'transactions', column: 'refund_status', announced: [], embedded: { initial: ['pending', 'completed'] },
  moves: {
    // Its send was mined (off-ramp) or the payer was paid (on-ramp); or it failed: the send reverted or was never
    // signed, so its amount is due again (off-ramp), or the provider refused the payout for good (on-ramp: sent again
    // after its backoff).
    pending: ['completed', 'failed'],
    // Sent again: the business asked (POST /refund, perhaps to a new refund_address), the sweeper retried an automatic
    // one (issue 36, defect 5), or an on-ramp's refused fiat refund went again after its backoff. Completed: a send
    // given up on was mined after all (the chain's word wins).
    failed: ['pending', 'completed'],
    // More USDC arrived after it completed (a late deposit, an excess after the payout) and goes back the same way.
    completed: ['pending'],
  },
  labels: {
    'pending->completed': 'mined (on-ramp: paid)', 'pending->failed': 'reverted or never signed (on-ramp: refused)',
    'failed->pending': 'retried or redirected', 'failed->completed': 'mined after all', 'completed->pending': 'more USDC arrived',
  },
};

/** The statuses from which `to` may be reached. */
export function sourcesOf<S extends string>(machine: Machine<S>, to: S): S[] {
  return (Object.entries(machine.moves) as [S, readonly S[]][]).filter(([, tos]) => tos.includes(to)).map(([from]) => from);
}

/** Every event type the service writes: one registry, typed, beside the job registry. */
export type EventType =
  | `transaction.${TransactionStatus}`
  | `settlement.${SettlementStatus}`
  | `payment_intent.${PaymentIntentStatus}`
  | `treasury_deposit.${TreasuryDepositStatus}`
  | `treasury_withdrawal.${TreasuryWithdrawalStatus}`
  | 'payout_batch.completed'
  | 'quote.available'
  | 'wallet.verified';

const MACHINES: Machine[] = [TRANSACTION_MACHINE, SETTLEMENT_MACHINE, QUOTE_MACHINE, WALLET_OWNERSHIP_MACHINE, PAYMENT_INTENT_MACHINE, TREASURY_DEPOSIT_MACHINE,
  TREASURY_WITHDRAWAL_MACHINE, PAYOUT_BATCH_MACHINE] as Machine[];

export const EVENT_TYPES: readonly EventType[] = MACHINES.flatMap((m) => m.announced.map((s) => `${m.resource}.${s}` as EventType));
