import { JOINED_BENEFICIARY, joinedBeneficiary, type ActiveBeneficiary } from '../../shared/domain/beneficiaries.js';
import { scopeOf, TRANSACTION_COLUMNS, type TransactionRow } from '../../shared/domain/transactions.js';
import { planOnce } from '../../shared/db/prepared-client.js';
import type { KnownSettlement } from '../../shared/domain/transaction-moves.js';
import { AppError } from '../../shared/errors.js';
import { type PaymentProvider, type ProviderOutcome } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import type { Queryable } from '../../shared/providers/provider.js';
import type { WorkerDeps } from '../job-definition.js';

/** A payout to make: the off-ramp, and its beneficiary's row (sealed) and its settlement read in the same statement. */
export interface PayoutToMake {
  tx: TransactionRow;
  /** The row with JOINED_BENEFICIARY's columns: opened only when the payout is requested. */
  row: Record<string, unknown>;
  /**
   * What its settlement received, read under the settlement's lock (`lock` only: an unlocked read may miss a transfer
   * recorded meanwhile): what follows its completion reads it (the excess goes back).
   */
  settlement?: KnownSettlement;
}

/**
 * The off-ramp as it is now, the beneficiary it pays and what its settlement received, read together (undefined: no
 * such transaction). `lock`: the transaction is locked as its moves lock it (FOR NO KEY UPDATE), for the unit that goes
 * on to move it, and its settlement with it, first, as every unit of an off-ramp's settlement takes them (lockSettled):
 * a transfer recorded while this read waited is then counted in what it answers (an unlocked join would answer the
 * settlement as it was when the read began). An off-ramp without a settlement (treasury-funded) is read on its own.
 */
export async function loadPayout(q: Queryable, transactionId: string, lock = false): Promise<PayoutToMake | undefined> {
  const columns = `${TRANSACTION_COLUMNS}, ${JOINED_BENEFICIARY.select}, s.received_amount::text AS settlement_received`;
  const beneficiary = 'LEFT JOIN beneficiaries b ON b.id = t.beneficiary_id AND b.business_id = t.business_id AND b.environment = t.environment';
  const read = (text: string): Promise<(TransactionRow & Record<string, unknown>)[]> => q.query(planOnce(text), [transactionId]);
  let [row] = lock
    ? await read(`SELECT ${columns} FROM settlements s JOIN transactions t ON t.id = s.transaction_id ${beneficiary}
        WHERE s.transaction_id = $1 FOR UPDATE OF s FOR NO KEY UPDATE OF t`)
    : [];
  row ??= (await read(`SELECT ${columns} FROM transactions t ${beneficiary} LEFT JOIN settlements s ON s.transaction_id = t.id
      WHERE t.id = $1${lock ? ' FOR NO KEY UPDATE OF t' : ''}`))[0];
  if (!row) return undefined;
  // The transaction alone: the beneficiary's sealed columns stay with the row they were read in.
  const { settlement_received: received, ...tx } = JOINED_BENEFICIARY.strip<TransactionRow & { settlement_received: string | null }>(row);
  return { tx, row, ...(lock ? { settlement: { transactionId: tx.id, received: received === null ? null : { received_amount: received } } } : {}) };
}

/** The off-ramp's provider, recording its requests through `db` (a unit's manager, where it answers in the unit). */
export function payoutProvider(deps: WorkerDeps, tx: TransactionRow, db: Queryable = deps.ds): PaymentProvider {
  return providerFor(tx.environment, { db, config: deps.config, log: deps.log }, tx.currency);
}

/** Asks the provider to pay an off-ramp out, with our transaction id as the reference (a repeat is the same payout). */
export async function requestPayout(deps: WorkerDeps, { tx, row }: PayoutToMake, provider = payoutProvider(deps, tx)): Promise<ProviderOutcome> {
  // A payout already under way still reaches the beneficiary it was started for, archived since or not.
  const beneficiary: ActiveBeneficiary | undefined = joinedBeneficiary(row, deps.config.encryptionKeys);
  if (!beneficiary) throw AppError.notFound('beneficiary');
  return provider.payout({
    reference: tx.id,
    scope: scopeOf(tx),
    currency: tx.currency,
    amount: tx.destination_amount,
    payment_method: tx.payment_method,
    account_holder_name: beneficiary.beneficiary.account_holder_name,
    details: beneficiary.details,
  });
}
