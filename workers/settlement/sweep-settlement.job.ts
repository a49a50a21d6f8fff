import { getAddress } from 'viem';
import { sendAndSettle } from '../../shared/chain/sender.js';
import type { Chain } from '../../shared/domain/chains.js';
import { defineJob } from '../job-definition.js';

/**
 * Live: a confirmed deposit address's USDC (an off-ramp's settlement, a payment intent's) goes to the treasury hot
 * wallet (its gas topped up from the hot wallet first), recorded in chain_sends; the reconciliation counts it into
 * the hot wallet. The payout never waits for it.
 * One sweep per deposit (`round`: the amount received so far, or the deposit's id), so a late one is swept on its own.
 */
export const sweepSettlementJob = defineJob({
  name: 'settlement.sweep',
  async process(job, deps) {
    const { kind, id, round } = job.data;
    const [address]: { environment: 'sandbox' | 'live'; chain: Chain; hd_index: number }[] = await deps.ds.query(
      kind === 'settlement' ? `SELECT environment, chain, hd_index FROM settlements WHERE id = $1` : `SELECT environment, chain, hd_index FROM payment_intents WHERE id = $1`,
      [id],
    );
    if (!address || address.environment !== 'live') return 'not live';
    const swept = await sendAndSettle(deps, {
      environment: 'live', chain: address.chain, reference: `sweep-${id}-${round}`, purpose: 'sweep',
      signer: { kind: 'managed', index: address.hd_index }, to: getAddress(deps.config.wallets.live!.treasuryAddress), asset: 'USDC', amount: 'all',
    });
    return swept ? { transaction_hash: swept.row.transaction_hash, amount: swept.row.amount } : 'nothing to sweep';
  },
});
