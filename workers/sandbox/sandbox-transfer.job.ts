import { inUnit } from '../../shared/db/unit-of-work.js';
import { simulatedHash } from '../../shared/chain/adapter.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { postEntry } from '../../shared/domain/ledger.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { observeTransfer } from '../../shared/domain/offramps.js';
import { loadSettlement } from '../../shared/domain/settlements.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { walletUsdcAccount } from '../../shared/domain/wallet-balances.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: the business's on-chain transfer to a deposit address. The outside world (the sandbox faucet) pays the
 * clearing account, and the transfer is observed exactly as the live chain watcher would report it.
 */
export const sandboxTransferJob = defineJob({
  name: 'sandbox.transfer',
  async process(job, deps) {
    const settlement = await loadSettlement(deps.ds, job.data.settlementId);
    if (!settlement || settlement.environment !== 'sandbox') return 'gone';
    const amount = toMinor(job.data.amount, USDC_SCALE);
    const hash = simulatedHash('sandbox', `transfer-${job.id}`);
    await inUnit(deps, async (unit) => {
      const scope = { businessId: settlement.business_id, environment: settlement.environment };
      // Observed first, the deposit's entry last: the shared clearing account is held only for the commit.
      await observeTransfer(unit, deps.config, settlement, { transactionHash: hash, logIndex: 0, amount }, undefined, chainFor('sandbox', deps.config));
      // The external wallet's simulated balance pays (checked by the control; a race loses here, for good).
      const tx = (await loadTransaction(unit.em, settlement.transaction_id))!;
      await postEntry(unit.em, scope, {
        kind: 'settlement_deposit',
        reference: `deposit-${settlement.id}-${hash}`,
        metadata: { settlement_id: settlement.id, transaction_hash: hash },
        postings: [
          { account: walletUsdcAccount(tx.wallet_id, settlement.chain), amount: -amount, noOverdraft: true },
          { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount },
        ],
      });
    });
    return hash;
  },
});
