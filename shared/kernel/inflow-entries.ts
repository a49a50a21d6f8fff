// The ledger references of USDC counted toward a deposit address, and of their reversal by a reorg. Pure: no I/O.
//
// A repeated reference posts nothing, so a reference must name one counting of a transfer, not the transfer: a reorg
// that takes the block away and then restores the very same block (same hash) counts the transfer a second time, and
// that counting must post again after the reversal (net: one deposit). Each counting is its own observation (the
// settlement_transfers row, which the reversal deletes), so its id is in the reference; the block hash is not enough.

export interface CountedInflow {
  settlementId: string;
  transactionHash: string;
  logIndex: number;
  /** The observation that counted it (settlement_transfers.id): a new one after every reversal. */
  observation: string;
}

export function depositReference(t: CountedInflow): string {
  return `offramp-deposit-${t.settlementId}-${t.transactionHash}-${t.logIndex}-obs${t.observation}`;
}

/** The reversal of exactly that counting: one per observation, however often the same block comes and goes. */
export function reversalReference(t: CountedInflow): string {
  return `reorg-${depositReference(t)}`;
}
