import { randomUUID } from 'node:crypto';
import { getAddress } from 'viem';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { inUnit, type Unit, type UnitDeps } from '../db/unit-of-work.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import type { Chain } from './chains.js';
import { platformFeeOf } from './fees.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { loadLiquidationAddress } from './liquidation-addresses.js';
import type { LiquidationRejection } from './liquidation-returns.js';
import { Decimal, formatRate, fromMinor, toMinor, USDC_SCALE, scaleOf } from './money.js';
import { observeTransfer } from './offramps.js';
import { corridorError, requireCorridor } from './corridors.js';
import { priceQuote, wholeFiatRail, type PlatformFee } from './pricing.js';
import { freshRateFromSource, type RateQuote } from './rates.js';
import { nextPricingStep, priceLiquidation, RATE_SCALE } from '../kernel/liquidation.js';
import { createSettlement, settlementOf } from './settlements.js';
import { insertTransaction } from './transactions.js';
import { insertConsumedQuote, type ServicePrice } from './quotes.js';

// A USDC transfer to a liquidation address (CONTRACT section 16), seen by the chain watcher (live) or played by the
// sandbox control: recorded once per log, then priced at that moment by the pricing pool into one off-ramp to the
// address's beneficiary whose settlement is the transfer itself (total_required = what arrived, fees taken from it).
// From there it is any off-ramp: confirmations, funded, the payout (or, for a transfer that cannot be paid out, the
// return to its sender: liquidation-returns.ts), and live the sweep of the address to the hot wallet.

/** The sandbox's fixed sender of liquidation transfers (what a return goes back to). */
export const SANDBOX_LIQUIDATION_SENDER = '0x5A0b54D5dc17e0AadC383d2db43B0a0D3E029c4c';

export interface LiquidationTransfer {
  transactionHash: string;
  logIndex: number;
  /** USDC minor units. */
  amount: bigint;
  from: string;
  blockNumber?: bigint | null;
  blockHash?: string | null;
}

interface TransferRow {
  id: string;
  liquidation_address_id: string;
  transaction_hash: string;
  log_index: number;
  amount: string;
  from_address: string;
  block_number: string | null;
  block_hash: string | null;
  archived: boolean;
  transaction_id: string | null;
  created_at: Date;
}

const TRANSFER_COLUMNS = `id, liquidation_address_id, transaction_hash, log_index, amount::text, from_address, block_number::text, block_hash, archived, transaction_id, created_at`;

/** The pricing job of one recorded transfer (its id is the transfer's: a repeat is a no-op). */
export const liquidationJob = (transferId: string, delayMs = 0): JobRequest<'liquidation.offramp'> => ({
  name: 'liquidation.offramp', id: jobId('liquidation.offramp', transferId), data: { transferId }, delayMs,
});

/**
 * Records a transfer to the address once (by hash and log index) and stages its pricing. One seen before whose
 * off-ramp exists is observed again on its settlement: a transfer a reorg removed and the new chain mined again.
 * The address row is read FOR SHARE, so an archive in flight is either before the transfer (returned) or after it.
 */
export async function receiveLiquidationTransfer(unit: Unit, config: Config, liquidationAddressId: string, transfer: LiquidationTransfer): Promise<string> {
  const address = await loadLiquidationAddress(unit.em, liquidationAddressId, true);
  if (!address) return 'gone';
  const inserted: { id: string }[] = await unit.em.query(
    `INSERT INTO liquidation_transfers (id, liquidation_address_id, transaction_hash, log_index, amount, from_address, block_number, block_hash, archived)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (liquidation_address_id, transaction_hash, log_index) DO NOTHING RETURNING id`,
    [randomUUID(), address.id, transfer.transactionHash, transfer.logIndex, fromMinor(transfer.amount, USDC_SCALE), getAddress(transfer.from),
      transfer.blockNumber?.toString() ?? null, transfer.blockHash ?? null, address.status === 'archived'],
  );
  const scope = { businessId: address.business_id, environment: address.environment };
  if (inserted[0]) {
    await unit.stage(liquidationJob(inserted[0].id, stepDelay(config, address.environment)), scope);
    return 'recorded';
  }
  const [known]: { transaction_id: string | null }[] = await unit.em.query(
    `SELECT transaction_id FROM liquidation_transfers WHERE liquidation_address_id = $1 AND transaction_hash = $2 AND log_index = $3`,
    [address.id, transfer.transactionHash, transfer.logIndex],
  );
  const settlement = known.transaction_id ? await settlementOf(unit.em, known.transaction_id, true) : undefined;
  if (!settlement) return 'being priced';
  await observeTransfer(unit, config, settlement, { ...transfer });
  return 'seen before';
}

/** Why a transfer goes back instead of being paid out, when that is known before pricing. */
function rejectionBefore(transfer: TransferRow, beneficiaryStatus: string): LiquidationRejection | null {
  if (transfer.archived) return { code: 'liquidation_address_archived', message: 'The transfer arrived after the liquidation address was archived; it is returned to its sender.' };
  if (beneficiaryStatus !== 'active') return { code: 'beneficiary_archived', message: 'The liquidation address\'s beneficiary is archived; the transfer is returned to its sender.' };
  return null;
}

/** A transfer returned unpaid: nothing goes to the beneficiary and no fee is taken, so all of it goes back. */
function unpaidPrice(received: string, beneficiary: Beneficiary, rate: string): ServicePrice {
  const zero = (unit: string) => fromMinor(0n, unit === 'USDC' ? USDC_SCALE : scaleOf(unit));
  return {
    currency: beneficiary.currency, payment_method: beneficiary.payment_method as ServicePrice['payment_method'], exchange_rate: formatRate(new Decimal(rate)),
    source: { amount: received, total_required: received }, destination: { amount: zero(beneficiary.currency) }, fees: { provider: zero('USDC'), platform: zero('USDC') },
  };
}

interface Beneficiary { currency: string; payment_method: string; status: string }

/** No fresh rate yet: the job asks again in `retryInMs` (before the transfer's deadline to go back). */
export class AwaitingRate extends AppError {
  constructor(currency: string, readonly retryInMs: number) {
    super('service_unavailable', `No fresh ${currency} rate to price the liquidation transfer with; asking again shortly.`);
    this.name = 'AwaitingRate';
  }
}

/** A rate fresh enough to price with, or null while the rate source has none (down, stale, not configured). */
async function freshRateOrNone(deps: UnitDeps, config: Config, environment: 'sandbox' | 'live', currency: string): Promise<RateQuote | null> {
  try {
    return await freshRateFromSource(deps.ds, config, environment, currency);
  } catch (err) {
    if (err instanceof AppError && err.code === 'service_unavailable') return null;
    throw err;
  }
}

/**
 * Fees from what arrived (those of the largest payout whose total fits), the rest converted: total_required is exactly
 * what arrived (the kernel's rule). Outside the corridor's limits: 422 amount_out_of_range, as a quote would be.
 */
function priceTransfer(received: string, beneficiary: Beneficiary, rate: string, platformFee: PlatformFee, environment: 'sandbox' | 'live'): ServicePrice {
  const whole = wholeFiatRail(environment, beneficiary.currency, beneficiary.payment_method);
  const budgeted = priceQuote({
    direction: 'offramp', currency: beneficiary.currency, payment_method: beneficiary.payment_method, total_budget: received, rate, platform_fee: platformFee, whole_fiat: whole,
  });
  const corridor = requireCorridor(beneficiary.currency, beneficiary.payment_method, 'offramp');
  const fiatScale = scaleOf(beneficiary.currency);
  const exact = priceLiquidation({
    received: toMinor(received, USDC_SCALE), fees: { provider: budgeted.minor.provider_fee, platform: budgeted.minor.platform_fee }, rate: toMinor(rate, RATE_SCALE),
    fiatScale, fiatStep: whole ? 10n ** BigInt(fiatScale) : 1n, limits: { min: toMinor(corridor.min_amount, fiatScale), max: toMinor(corridor.max_amount, fiatScale) },
  });
  if (exact.kind === 'out_of_range') {
    throw corridorError('amount_out_of_range', `With the fees taken, the payout would be ${fromMinor(exact.destination, fiatScale)} ${beneficiary.currency}, outside the ${corridor.min_amount} to ${corridor.max_amount} ${beneficiary.currency} the corridor allows.`,
      { min_amount: corridor.min_amount, max_amount: corridor.max_amount, currency: beneficiary.currency });
  }
  const { price } = exact;
  return {
    currency: budgeted.currency, payment_method: budgeted.payment_method, exchange_rate: budgeted.exchange_rate,
    source: { amount: fromMinor(price.source, USDC_SCALE), total_required: fromMinor(price.totalRequired, USDC_SCALE) },
    destination: { amount: fromMinor(price.destination, fiatScale) }, fees: { provider: budgeted.fees.provider, platform: budgeted.fees.platform },
  };
}

/**
 * The pricing pool's job: prices the transfer now from a fresh rate of the beneficiary's currency (fees from what
 * arrived, the rest paid out), then in one unit writes its consumed quote, the off-ramp (`liquidation_address`
 * funding) and its settlement, and observes the transfer on it. A transfer outside the corridor's limits (or one the
 * address's archive or the beneficiary's rules out, or one no fresh rate priced within AUTO_REFUND_AFTER_SECONDS)
 * becomes the same off-ramp priced to pay nothing, with the reason it is returned once confirmed. Without a fresh
 * rate before then, AwaitingRate: the job asks again.
 */
export async function startLiquidationOfframp(deps: UnitDeps, config: Config, transferId: string): Promise<string> {
  const [transfer]: TransferRow[] = await deps.ds.query(`SELECT ${TRANSFER_COLUMNS} FROM liquidation_transfers WHERE id = $1`, [transferId]);
  if (!transfer || transfer.transaction_id) return 'already priced';
  const address = (await loadLiquidationAddress(deps.ds, transfer.liquidation_address_id))!;
  const scope = { businessId: address.business_id, environment: address.environment };
  const [beneficiary]: Beneficiary[] = await deps.ds.query(`SELECT currency, payment_method, status FROM beneficiaries WHERE id = $1`, [address.beneficiary_id]);
  const received = fromMinor(toMinor(transfer.amount, USDC_SCALE), USDC_SCALE);
  const rate = await freshRateOrNone(deps, config, address.environment, beneficiary.currency);
  let rejection = rejectionBefore(transfer, beneficiary.status);
  const step = nextPricingStep({
    rejected: rejection !== null, rateAvailable: rate !== null, recordedAtMs: transfer.created_at.getTime(), nowMs: Date.now(), returnAfterSeconds: config.autoRefundAfterSeconds,
  });
  if (step.kind === 'wait_for_rate') throw new AwaitingRate(beneficiary.currency, step.retryInMs);
  if (step.kind === 'return' && step.reason === 'rate_unavailable') {
    rejection = { code: 'rate_unavailable', message: `No fresh ${beneficiary.currency} rate came within ${config.autoRefundAfterSeconds} s of the transfer (AUTO_REFUND_AFTER_SECONDS); it is returned to its sender.` };
  }
  let priced: ServicePrice | null = null;
  if (step.kind === 'price') {
    try {
      priced = priceTransfer(received, beneficiary, rate!.rate, await platformFeeOf(deps.ds, address.business_id), address.environment);
    } catch (err) {
      if (!(err instanceof AppError) || !['amount_out_of_range', 'unsupported_corridor'].includes(err.code)) throw err;
      rejection = { code: err.code, message: `${err.message} The transfer is returned to its sender.`, ...(err.details ? { details: err.details as Record<string, unknown> } : {}) };
    }
  }
  // Returned unpriced for want of a rate: none is shown (0), and the quote names no time one was observed.
  const price = priced ?? unpaidPrice(received, beneficiary, rate?.rate ?? '0');
  return inUnit(deps, async (unit) => {
    const [locked]: TransferRow[] = await unit.em.query(`SELECT ${TRANSFER_COLUMNS} FROM liquidation_transfers WHERE id = $1 FOR UPDATE`, [transferId]);
    if (locked.transaction_id) return 'already priced';
    const quote = await insertConsumedQuote(unit, scope, { chain: address.chain, beneficiaryId: address.beneficiary_id, priced: price, rateAsOf: rate?.as_of ?? null });
    const tx = await insertTransaction(unit, scope, {
      quote, wallet: null, fundingAddress: address.address, status: 'created', fundingType: 'liquidation_address', customerId: address.customer_id,
      liquidationAddressId: address.id,
    });
    const fees = toMinor(price.fees.provider, USDC_SCALE) + toMinor(price.fees.platform, USDC_SCALE);
    const settlement = await createSettlement(unit, config, scope, {
      transactionId: tx.id, chain: address.chain as Chain, fromAddress: transfer.from_address, amount: price.source.amount, feeAmount: fromMinor(fees, USDC_SCALE),
      totalRequired: price.source.total_required, issuedBlock: null, liquidationAddress: { id: address.id, address: address.address, hdIndex: address.hd_index },
    });
    await unit.em.query(`UPDATE liquidation_transfers SET transaction_id = $2, rejection = $3 WHERE id = $1`, [transferId, tx.id, rejection ? JSON.stringify(rejection) : null]);
    // Like any settlement (expiry.settlements): one a reorg emptied and nothing mined again expires, and its off-ramp fails.
    await observeTransfer(unit, config, settlement, {
      transactionHash: transfer.transaction_hash, logIndex: transfer.log_index, amount: toMinor(received, USDC_SCALE), from: transfer.from_address,
      blockNumber: transfer.block_number === null ? null : BigInt(transfer.block_number), blockHash: transfer.block_hash,
    }, tx);
    return rejection ? `${tx.id} (to be returned: ${rejection.code})` : tx.id;
  });
}
