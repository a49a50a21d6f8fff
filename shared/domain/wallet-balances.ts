import type { DataSource, EntityManager } from 'typeorm';
import type { Address } from 'viem';
import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import { ChainUnavailableError } from '../chain/clients.js';
import { usdcBalanceOf } from '../chain/usdc.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { accountBalance, creditFromFaucet, InsufficientFundsError, type LedgerAccount } from './ledger.js';
import { AmountError, fromMinor, toMinor, USDC_SCALE } from './money.js';
import { assertActive, findWallet, resolveChain, type WalletRow } from './wallets.js';
import type { Unit } from '../db/unit-of-work.js';
import { simulatedHash } from '../chain/adapter.js';
import { apply } from '../kernel/apply.js';
import { sandboxTransferPlan } from '../kernel/debits.js';
import { txJobs } from './lifecycle-jobs.js';
import { randomUUID } from 'node:crypto';

/** The most simulated USDC one sandbox funding call may credit. */
export const MAX_SANDBOX_FUNDING_MINOR = 1_000_000_000n * 10n ** BigInt(USDC_SCALE);

export function walletUsdcAccount(walletId: string, chain: Chain): LedgerAccount {
  return { kind: 'wallet', walletId, chain, asset: 'USDC' };
}

function balanceView(config: Config, wallet: WalletRow, chain: Chain, amount: bigint, simulated: boolean, checkedAt: Date): Record<string, unknown> {
  return {
    wallet_id: wallet.id,
    chain,
    asset: 'USDC',
    available: fromMinor(amount, USDC_SCALE),
    simulated,
    checked_at: checkedAt.toISOString(),
    token_address: config.chains[chain].usdcAddress,
  };
}

/** Sandbox: the ledger balance of the wallet on that chain. Live: balanceOf on the chain's USDC contract. */
export async function walletBalance(
  ds: DataSource,
  config: Config,
  scope: EventScope,
  walletId: string,
  requestedChain: Chain | undefined,
): Promise<Record<string, unknown>> {
  const wallet = await findWallet(ds, scope, walletId);
  const chain = resolveChain(wallet, requestedChain);
  if (scope.environment === 'sandbox') {
    const amount = await accountBalance(ds, scope, walletUsdcAccount(wallet.id, chain));
    return balanceView(config, wallet, chain, amount, true, new Date());
  }
  try {
    const onChain = await usdcBalanceOf(config, chain, wallet.address as Address);
    return balanceView(config, wallet, chain, onChain.amount, false, onChain.checkedAt);
  } catch (err) {
    if (err instanceof ChainUnavailableError) throw AppError.unavailable(`The ${chain} network cannot be read right now; retry shortly.`);
    throw err;
  }
}

function parseFundingAmount(amount: string): bigint {
  let minor: bigint;
  try {
    minor = toMinor(amount, USDC_SCALE);
  } catch (err) {
    if (err instanceof AmountError) throw AppError.invalid(`amount must be a USDC amount with at most ${USDC_SCALE} decimals.`, [{ path: 'amount', in: 'body', message: err.message }]);
    throw err;
  }
  if (minor <= 0n || minor > MAX_SANDBOX_FUNDING_MINOR) {
    throw AppError.invalid('amount must be more than 0 and at most 1000000000 USDC.', [{ path: 'amount', in: 'body', message: 'is out of range' }]);
  }
  return minor;
}

/** Sandbox control: credits simulated USDC to a wallet from the sandbox faucet, as one ledger entry. */
export async function fundSandboxWallet(
  em: EntityManager,
  config: Config,
  scope: EventScope,
  walletId: string,
  input: { chain: Chain; amount: string },
): Promise<Record<string, unknown>> {
  const minor = parseFundingAmount(input.amount);
  // A share lock: funding runs concurrently, archiving waits for it (and it for archiving).
  const wallet = await findWallet(em, scope, walletId, 'share');
  assertActive(wallet);
  const chain = resolveChain(wallet, input.chain, 'body');
  const credited = walletUsdcAccount(wallet.id, chain);
  const entryId = await creditFromFaucet(em, scope, credited, minor, { description: `Sandbox funding of ${fromMinor(minor, USDC_SCALE)} USDC`, metadata: { wallet_id: wallet.id, chain } });
  const balance = await accountBalance(em, scope, credited);
  return {
    id: entryId,
    wallet_id: wallet.id,
    chain,
    asset: 'USDC',
    amount: fromMinor(minor, USDC_SCALE),
    balance: balanceView(config, wallet, chain, balance, true, new Date()),
  };
}

/**
 * Sandbox control: an external wallet's transfer to a settlement's deposit address. It leaves the wallet's simulated
 * balance now, as a signed transfer would (409 invalid_state when the wallet holds less), and the chain sees it a
 * step later (the sandbox.transfer job). Answers the transfer's simulated hash.
 */
export async function sandboxWalletTransfer(unit: Unit, config: Config, scope: EventScope, t: { settlementId: string; walletId: string; chain: Chain; amount: bigint }): Promise<string> {
  const hash = simulatedHash('sandbox', `transfer-${t.settlementId}-${randomUUID()}`);
  const observe = txJobs.sandboxTransfer(t.settlementId, hash, config.sandboxStepMs);
  try {
    await apply(unit, sandboxTransferPlan(scope, { ...t, hash, observe }), new Map());
  } catch (err) {
    if (!(err instanceof InsufficientFundsError)) throw err;
    throw AppError.invalidState(`The wallet holds ${fromMinor(err.available, USDC_SCALE)} simulated USDC on ${t.chain}; fund it with POST /sandbox/wallets/{id}/fund first.`, {
      wallet_id: t.walletId, available: fromMinor(err.available, USDC_SCALE), required: fromMinor(t.amount, USDC_SCALE),
    });
  }
  return hash;
}
