import { getAddress } from 'viem';
import { sendAndSettle } from '../../shared/chain/sender.js';
import { treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { loadSettlement } from '../../shared/domain/settlements.js';
import { defineJob } from '../job-definition.js';

/**
 * Live: a confirmed deposit address's USDC goes to the treasury hot wallet (its gas topped up from the hot wallet
 * first), recorded in chain_sends; the reconciliation counts it into the hot wallet. The payout never waits for it.
 * One sweep per amount received (a late deposit is swept on its own).
 */
export const sweepSettlementJob = defineJob({
  name: 'settlement.sweep',
  async process(job, deps) {
    const settlement = await loadSettlement(deps.ds, job.data.settlementId);
    if (!settlement || settlement.environment !== 'live') return 'not live';
    const seed = deps.config.walletSeeds.live!;
    const swept = await sendAndSettle(deps, {
      environment: 'live', chain: settlement.chain, reference: `sweep-${settlement.id}-${job.data.received}`, purpose: 'sweep',
      signer: { kind: 'managed', index: settlement.hd_index }, to: getAddress(treasuryAddress(seed)), asset: 'USDC', amount: 'all',
    });
    return swept ? { transaction_hash: swept.row.transaction_hash, amount: swept.row.amount } : 'nothing to sweep';
  },
});
