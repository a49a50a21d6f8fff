import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import { inUnit, type Unit } from '../db/unit-of-work.js';
import type { EventScope } from '../domain/events.js';
import { InsufficientFundsError } from '../domain/ledger.js';
import { apply } from '../kernel/apply.js';
import { managedSendPlan } from '../kernel/debits.js';
import { simulatedHash, type ChainAdapter, type ConfirmationSubject } from './adapter.js';
import { liveChain } from './live-chain.js';
import { ChainFundsError } from './sender.js';

/**
 * The sandbox's chain is the ledger: a managed wallet's transfer debits its simulated balance (never below zero),
 * deliveries and refunds are recorded at once, and hashes are simulated in the on-chain format. Confirmations rise one
 * per SANDBOX_STEP_MS from the moment the transfer was seen (all at once when the step is 0), so the domain checks once
 * when they are all there rather than once per step. No block is ever removed.
 */
export function sandboxChain(stepMs: number): ChainAdapter {
  const adapter: ChainAdapter = {
    live: false,
    sendFromManagedWallet(deps, scope: EventScope, req) {
      return inUnit(deps, (unit) => adapter.sendInUnit!(unit, scope, req));
    },
    async sendInUnit(unit, scope: EventScope, req) {
      try {
        // One entry per off-ramp (its reference): a repeated step finds it and sends nothing twice. A guarded entry,
        // posted by apply() at once: a debit the balance refuses is refused where it is decided.
        await apply(unit, managedSendPlan(scope, { reference: req.reference, walletId: req.walletId, chain: req.chain, amount: req.amount }), new Map());
      } catch (err) {
        if (err instanceof InsufficientFundsError) throw new ChainFundsError(req.walletId, err.available, err.required);
        throw err;
      }
      return { hash: simulatedHash(scope.environment, `send-${req.reference}`), nonce: 0, logIndex: 0, blockNumber: null, blockHash: null };
    },
    async deliver(_unit: Unit, scope: EventScope, req) {
      return { hash: simulatedHash(scope.environment, `deliver-${req.reference}`) };
    },
    async refund(_unit: Unit, scope: EventScope, req) {
      // Done at once (the domain books it as it books a mined live refund).
      return { hash: simulatedHash(scope.environment, `refund-${req.reference}`) };
    },
    async withdraw(_unit: Unit, scope: EventScope, req) {
      // The withdrawal's own ledger entry credits the wallet's simulated balance when it completes.
      return { hash: simulatedHash(scope.environment, `withdrawal-${req.reference}`) };
    },
    async confirmations(subject: ConfirmationSubject) {
      if (!subject.detected_at) return 0;
      if (stepMs <= 0) return subject.required_confirmations;
      return Math.min(subject.required_confirmations, 1 + Math.floor((Date.now() - subject.detected_at.getTime()) / stepMs));
    },
    readyInMs(subject: ConfirmationSubject) {
      if (!subject.detected_at || stepMs <= 0) return 0;
      return Math.max(0, subject.detected_at.getTime() + (subject.required_confirmations - 1) * stepMs - Date.now());
    },
    async canonical() {
      return true;
    },
    async head() {
      return null;
    },
  };
  return adapter;
}

/** The chain that serves an environment: the sandbox plays it; live reads and signs on each chain's RPC. */
export function chainFor(environment: 'sandbox' | 'live', config: Config): ChainAdapter {
  // Tests of the live fiat rail (RAMPWAY_TEST_LIVE_CHAIN=sandbox, refused in production) run on the sandbox chain.
  if (environment === 'sandbox' || config.liveChainOverride === 'sandbox') return sandboxChain(config.sandboxStepMs);
  if (!config.wallets.live) throw AppError.unavailable('The live chain rails are not configured on this deployment (WALLET_XPUB_LIVE).', 60);
  return liveChain(config);
}
