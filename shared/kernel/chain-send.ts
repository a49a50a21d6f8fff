// Jobs carry references, not money (CONTRACT 18): what a chain.send job may send is decided here from the send the
// database recorded under the job's reference (chain_sends, written by the unit that decided it), never from the
// job's data. Pure: no I/O.

/** The hot-wallet sends a chain.send job carries out, and what each completes. */
export const JOB_SEND_PURPOSES = ['onramp_delivery', 'refund', 'withdrawal'] as const;
export type JobSendPurpose = (typeof JOB_SEND_PURPOSES)[number];

/** A chain_sends row as the job reads it. */
export interface RecordedSend {
  purpose: string;
  status: 'planned' | 'sent' | 'mined' | 'reverted' | 'failed';
  to_address: string;
  amount: string;
  asset: 'USDC' | 'native';
  /** null: the treasury hot wallet signs; else the managed or deposit address at that HD index. */
  hd_index: number | null;
  transaction_id: string | null;
  withdrawal_id: string | null;
  refund_total: string | null;
}

export type SendSubject =
  | { purpose: 'onramp_delivery'; transactionId: string }
  | { purpose: 'refund'; transactionId: string; total: string | null }
  | { purpose: 'withdrawal'; withdrawalId: string };

export type ChainSendDecision =
  | {
    kind: 'send';
    /** planned: sign it now; otherwise already signed: settle it (checked on the chain, never signed twice). */
    sign: boolean;
    to: string;
    amount: bigint;
    asset: 'USDC' | 'native';
    signer: { kind: 'treasury' } | { kind: 'managed'; index: number };
    subject: SendSubject;
  }
  | { kind: 'nothing'; reason: string };

/** What a chain.send job naming `row`'s reference may do: exactly what the row says, or nothing. */
export function decideChainSend(row: RecordedSend | undefined): ChainSendDecision {
  if (!row) return { kind: 'nothing', reason: 'no send is recorded under this reference' };
  const subject = subjectOf(row);
  if (!subject) return { kind: 'nothing', reason: `a ${row.purpose} send is not a chain.send job's, or names nothing it pays for` };
  const amount = BigInt(row.amount);
  if (amount <= 0n) return { kind: 'nothing', reason: 'the recorded amount is not positive' };
  return {
    kind: 'send', sign: row.status === 'planned', to: row.to_address, amount, asset: row.asset, subject,
    signer: row.hd_index === null ? { kind: 'treasury' } : { kind: 'managed', index: row.hd_index },
  };
}

function subjectOf(row: RecordedSend): SendSubject | null {
  if (row.purpose === 'withdrawal') return row.withdrawal_id ? { purpose: 'withdrawal', withdrawalId: row.withdrawal_id } : null;
  if (row.purpose === 'onramp_delivery') return row.transaction_id ? { purpose: 'onramp_delivery', transactionId: row.transaction_id } : null;
  if (row.purpose === 'refund') return row.transaction_id ? { purpose: 'refund', transactionId: row.transaction_id, total: row.refund_total } : null;
  return null;
}

/** A chain.send payload staged by the code before sends were planned: its outbox row, written by the deciding unit. */
export interface LegacySendPayload {
  reference?: unknown;
  purpose?: unknown;
  to?: unknown;
  amount?: unknown;
  transactionId?: unknown;
  withdrawalId?: unknown;
  total?: unknown;
}

/**
 * An in-flight job from before sends were planned: resolved only through the outbox row its deciding unit wrote (never
 * the job's own data), into the send that unit decided; anything incomplete resolves to nothing.
 */
export function plannedFromLegacy(reference: string, payload: LegacySendPayload | undefined): Omit<RecordedSend, 'status' | 'hd_index'> | null {
  if (!payload || payload.reference !== reference) return null;
  const { purpose, to, amount } = payload;
  if (typeof purpose !== 'string' || !(JOB_SEND_PURPOSES as readonly string[]).includes(purpose)) return null;
  if (typeof to !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(to) || typeof amount !== 'string' || !/^[1-9][0-9]*$/.test(amount)) return null;
  const id = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);
  const total = typeof payload.total === 'string' && /^[1-9][0-9]*$/.test(payload.total) ? payload.total : null;
  const planned = {
    purpose, to_address: to.toLowerCase(), amount, asset: 'USDC' as const,
    transaction_id: purpose === 'withdrawal' ? null : id(payload.transactionId),
    withdrawal_id: purpose === 'withdrawal' ? id(payload.withdrawalId) : null,
    refund_total: purpose === 'refund' ? total : null,
  };
  return subjectOf({ ...planned, status: 'planned', hd_index: null }) ? planned : null;
}
