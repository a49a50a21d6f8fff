import { inUnit } from '../../shared/db/unit-of-work.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { receiveLiquidationTransfer, SANDBOX_LIQUIDATION_SENDER } from '../../shared/domain/liquidation-transfers.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: a step after the control accepted it, the transfer from the fixed sandbox sender to the liquidation address
 * is observed exactly as the live chain watcher would report it.
 */
export const sandboxLiquidationTransferJob = defineJob({
  name: 'sandbox.liquidation_transfer',
  async process(job, deps) {
    const transfer = { transactionHash: job.data.transactionHash, logIndex: 0, amount: toMinor(job.data.amount, USDC_SCALE), from: SANDBOX_LIQUIDATION_SENDER };
    return inUnit(deps, (unit) => receiveLiquidationTransfer(unit, deps.config, job.data.liquidationAddressId, transfer));
  },
});
