import { inUnit } from '../../shared/db/unit-of-work.js';
import { bookedTo } from '../../shared/domain/ledger.js';
import { loadLiquidationAddress } from '../../shared/domain/liquidation-addresses.js';
import { receiveLiquidationTransfer, SANDBOX_LIQUIDATION_SENDER } from '../../shared/domain/liquidation-transfers.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: a step after the control accepted it, the transfer from the fixed sandbox sender to the liquidation address
 * is observed exactly as the live chain watcher would report it. The job names the transfer; its amount is what the
 * control booked under that hash (CONTRACT §18: a job carries references, never money).
 */
export const sandboxLiquidationTransferJob = defineJob({
  name: 'sandbox.liquidation_transfer',
  async process(job, deps) {
    const { liquidationAddressId: id, transactionHash } = job.data;
    const address = await loadLiquidationAddress(deps.ds, id);
    if (!address || address.environment !== 'sandbox') return 'gone';
    const amount = await bookedTo(deps.ds, { businessId: address.business_id, environment: address.environment }, `liquidation-deposit-${id}-${transactionHash}`, 'settlement_clearing');
    if (amount === null) return 'no such transfer';
    const transfer = { transactionHash, logIndex: 0, amount, from: SANDBOX_LIQUIDATION_SENDER };
    return inUnit(deps, (unit) => receiveLiquidationTransfer(unit, deps.config, id, transfer));
  },
});
