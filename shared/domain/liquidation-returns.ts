import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { refundOfframp } from './refunds.js';
import { scopeOf, type TransactionRow } from './transactions.js';
import { failWithRefund } from './refund-records.js';

// The compensation of a liquidation transfer that cannot be paid out (CONTRACT section 16): outside the corridor's
// limits, or sent to an archived address. It is decided when the transfer is priced and taken once the transfer is
// confirmed (never before: a reorg could still remove it): the USDC goes back to the sender and the off-ramp fails.

export interface LiquidationRejection {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

/** A confirmed off-ramp is funded: its payout starts, or a liquidation transfer to be returned goes back to its sender. */
export async function payOrReturn(unit: Unit, config: Config, chain: ChainAdapter, tx: TransactionRow): Promise<void> {
  if (tx.funding_type === 'liquidation_address') {
    const [transfer]: { rejection: LiquidationRejection | null }[] = await unit.em.query(`SELECT rejection FROM liquidation_transfers WHERE transaction_id = $1`, [tx.id]);
    if (transfer?.rejection) {
      const refund = await refundOfframp(unit, chain, tx);
      await failWithRefund(unit, tx, refund, { set: { failure: transfer.rejection }, reason: transfer.rejection.code });
      return;
    }
  }
  await unit.stage(txJobs.payout(tx, stepDelay(config, tx.environment)), scopeOf(tx));
}
