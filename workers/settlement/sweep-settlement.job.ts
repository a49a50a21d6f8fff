import { getAddress } from 'viem';
import { findSend, sendAndSettle, settle, type SenderDeps } from '../../shared/chain/sender.js';
import type { Chain, Environment } from '../../shared/domain/chains.js';
import { defineJob } from '../job-definition.js';

/**
 * Empties a deposit address into the treasury hot wallet (its gas topped up from the hot wallet first) and waits for
 * it to be mined, after whatever the address already has in flight (an earlier sweep): once it answers, every USDC
 * the address held is in the hot wallet. Null when there was nothing left to sweep.
 */
export async function sweepDepositAddress(deps: SenderDeps, a: { environment: Environment; chain: Chain; address: string; hdIndex: number; reference: string }) {
  const inFlight: { reference: string }[] = await deps.ds.query(
    `SELECT reference FROM chain_sends WHERE environment = $1 AND chain = $2 AND from_address = $3 AND asset = 'USDC' AND status = 'sent'`,
    [a.environment, a.chain, a.address.toLowerCase()],
  );
  for (const { reference } of inFlight) {
    const row = await findSend(deps.ds, a.environment, a.chain, reference);
    if (row?.status === 'sent') await settle(deps, a.chain, row);
  }
  return sendAndSettle(deps, {
    environment: a.environment, chain: a.chain, reference: a.reference, purpose: 'sweep',
    signer: { kind: 'managed', index: a.hdIndex }, to: getAddress(deps.config.wallets[a.environment]!.treasuryAddress), asset: 'USDC', amount: 'all',
  });
}

/**
 * Live: a confirmed deposit address's USDC (an off-ramp's settlement, a payment intent's) goes to the treasury hot
 * wallet, recorded in chain_sends; the reconciliation counts it into the hot wallet. The payout never waits for it.
 * One sweep per deposit (`round`: the amount received so far, or the deposit's id), so a late one is swept on its own.
 */
export const sweepSettlementJob = defineJob({
  name: 'settlement.sweep',
  async process(job, deps) {
    const { kind, id, round } = job.data;
    const [address]: { environment: Environment; chain: Chain; hd_index: number; address: string }[] = await deps.ds.query(
      kind === 'settlement' ? `SELECT environment, chain, hd_index, to_address AS address FROM settlements WHERE id = $1` : `SELECT environment, chain, hd_index, deposit_address AS address FROM payment_intents WHERE id = $1`,
      [id],
    );
    if (!address || address.environment !== 'live') return 'not live';
    const swept = await sweepDepositAddress(deps, { environment: 'live', chain: address.chain, address: address.address, hdIndex: address.hd_index, reference: `sweep-${id}-${round}` });
    return swept ? { transaction_hash: swept.row.transaction_hash, amount: swept.row.amount } : 'nothing to sweep';
  },
});
