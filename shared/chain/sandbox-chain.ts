import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import type { EventScope } from '../domain/events.js';
import { postEntry } from '../domain/ledger.js';
import { walletUsdcAccount } from '../domain/wallet-balances.js';
import { simulatedHash, type ChainAdapter, type ConfirmationSubject } from './adapter.js';

/**
 * The sandbox's chain is the ledger: a managed wallet's transfer debits its simulated balance (never below zero),
 * a delivery credits the destination, and hashes are simulated in the on-chain format. Confirmations rise one per
 * SANDBOX_STEP_MS from the moment the transfer was seen (all at once when the step is 0).
 */
export function sandboxChain(stepMs: number): ChainAdapter {
  return {
    async sendFromManagedWallet(unit: Unit, scope: EventScope, req) {
      await postEntry(unit.em, scope, {
        kind: 'offramp_funding',
        reference: `offramp-funding-${req.reference}`,
        metadata: { transaction_id: req.reference, wallet_id: req.walletId },
        postings: [
          { account: walletUsdcAccount(req.walletId, req.chain), amount: -req.amount, noOverdraft: true },
          { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: req.amount },
        ],
      });
      return { hash: simulatedHash(scope.environment, `send-${req.reference}`), nonce: 0 };
    },
    async deliver(unit: Unit, scope: EventScope, req) {
      await postEntry(unit.em, scope, {
        kind: 'onramp_delivery',
        reference: `onramp-delivery-${req.reference}`,
        metadata: { transaction_id: req.reference, wallet_id: req.walletId },
        postings: [
          { account: { kind: 'provider_clearing', asset: 'USDC' }, amount: -req.amount },
          { account: walletUsdcAccount(req.walletId, req.chain), amount: req.amount },
        ],
      });
      return { hash: simulatedHash(scope.environment, `deliver-${req.reference}`) };
    },
    async refundExternal(unit: Unit, scope: EventScope, req) {
      // Back to the external wallet's simulated balance, where the transfer came from.
      await postEntry(unit.em, scope, {
        kind: 'offramp_refund',
        reference: `refund-${req.reference}`,
        metadata: { refund: req.reference, settlement_id: req.settlementId },
        postings: [
          { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: -req.amount },
          { account: walletUsdcAccount(req.walletId, req.chain), amount: req.amount },
        ],
      });
      return { hash: simulatedHash(scope.environment, `refund-${req.reference}`) };
    },
    async confirmations(subject: ConfirmationSubject) {
      if (!subject.detected_at) return 0;
      if (stepMs <= 0) return subject.required_confirmations;
      return Math.min(subject.required_confirmations, 1 + Math.floor((Date.now() - subject.detected_at.getTime()) / stepMs));
    },
  };
}

/** The chain that serves an environment: the sandbox plays it; the live adapter plugs in here. */
export function chainFor(environment: 'sandbox' | 'live', config: { sandboxStepMs: number; liveChainOverride?: 'sandbox' | null }): ChainAdapter {
  // Tests of the live fiat rail (RAMPWAY_TEST_LIVE_CHAIN=sandbox, refused in production) run on the sandbox chain.
  if (environment === 'sandbox' || config.liveChainOverride === 'sandbox') return sandboxChain(config.sandboxStepMs);
  throw AppError.unavailable('The live chain rails are not configured on this deployment yet.', 60);
}
