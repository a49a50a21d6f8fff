// The chain's own records as machines with typed outcomes, decided here and carried out as compare-and-sets: a send
// from one of our addresses (what its receipt, or its absence after a reorg, means) and USDC that reached one of our
// addresses from outside (credited once deep enough, or dropped when a reorg took it). Pure: no I/O.
import type { Chain, Environment } from '../domain/chains.js';
import type { EntryInput } from '../domain/ledger.js';
import { CHAIN_INFLOW_MACHINE, CHAIN_SEND_MACHINE, type ChainInflowStatus, type ChainSendStatus } from '../domain/machines.js';
import { nothing, NOW, plan, type Move, type Plan } from './plan.js';

/** What the chain says about a send: its receipt (any of its hashes), or `gone` (no receipt and the transaction unknown). */
export type ReceiptFact = { kind: 'receipt'; success: boolean; hash: string; block: bigint } | { kind: 'gone' };

export type SendOutcome =
  /** A status move, a compare-and-set from the status read. */
  | { kind: 'move'; move: Move }
  /** Mined again in another block (a reorg, then mined again): the status stays, its hash and block are updated. */
  | { kind: 'reblocked'; hash: string; block: bigint }
  | { kind: 'none'; reason: string };

export function decideSendReceipt(send: { id: string; status: ChainSendStatus; blockNumber: string | null }, fact: ReceiptFact): SendOutcome {
  const move = (to: ChainSendStatus, set: Record<string, unknown>): SendOutcome => ({
    kind: 'move', move: { machine: CHAIN_SEND_MACHINE, id: send.id, from: send.status, to, set: { ...set, updated_at: NOW } },
  });
  if (fact.kind === 'gone') return send.status === 'mined' ? move('sent', { block_number: null }) : { kind: 'none', reason: `not mined (${send.status})` };
  if (send.status !== 'sent' && send.status !== 'mined') return { kind: 'none', reason: `not sent (${send.status})` };
  const found = { transaction_hash: fact.hash, block_number: fact.block.toString() };
  if (!fact.success) return move('reverted', found);
  if (send.status === 'sent') return move('mined', found);
  return send.blockNumber === fact.block.toString() ? { kind: 'none', reason: 'mined where it was' } : { kind: 'reblocked', hash: fact.hash, block: fact.block };
}

export interface InflowSnapshot {
  id: string;
  status: ChainInflowStatus;
  environment: Environment;
  chain: Chain;
  kind: 'managed_wallet' | 'treasury';
  walletId: string | null;
  /** The managed wallet's business; null for the hot wallet's inflows (recorded for the reconciliation, never booked). */
  businessId: string | null;
  transactionHash: string;
  logIndex: number;
  amount: bigint;
  from: string | null;
}

/** What its depth says: deep enough on the canonical chain, or taken off it by a reorg. */
export type InflowFact = { kind: 'deep' } | { kind: 'reorged' };

/** A managed wallet's inflow credited from the inbound clearing account, once per transfer (hash and log index). */
export function inflowEntry(i: InflowSnapshot): EntryInput {
  return {
    kind: 'wallet_deposit',
    reference: `wallet-deposit-${i.chain}-${i.transactionHash}-${i.logIndex}`,
    metadata: { wallet_id: i.walletId, transaction_hash: i.transactionHash, log_index: i.logIndex, from: i.from },
    postings: [
      { account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -i.amount },
      { account: { kind: 'wallet', walletId: i.walletId!, chain: i.chain, asset: 'USDC' }, amount: i.amount },
    ],
  };
}

/** A pending inflow deep enough is credited (a managed wallet's, booked; the hot wallet's, only recorded); one a reorg took credits nothing. */
export function decideInflow(i: InflowSnapshot, fact: InflowFact): Plan {
  // A platform record names no business: its plan's scope is the wallet's business when it books, else none.
  const scope = { businessId: i.businessId ?? '', environment: i.environment };
  if (i.status !== 'pending') return nothing(scope, `not pending (${i.status})`);
  const to = fact.kind === 'deep' ? 'credited' : 'reorged';
  const books = to === 'credited' && i.kind === 'managed_wallet' && i.walletId !== null && i.businessId !== null;
  return plan(scope, to, {
    moves: [{ machine: CHAIN_INFLOW_MACHINE, id: i.id, from: 'pending', to, ...(to === 'reorged' ? { reason: 'reorg' } : {}) }],
    entries: books ? [{ entry: inflowEntry(i) }] : [],
  });
}
