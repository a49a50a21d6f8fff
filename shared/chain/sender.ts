import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import { encodeFunctionData, erc20Abi, getAddress, keccak256, parseEventLogs, parseTransaction, type Address, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import { sendRawTransaction } from 'viem/actions';
import type { Config } from '../config.js';
import { CHAIN_IDS, type Chain, type Environment } from '../domain/chains.js';
import { updateReturning } from '../db/unit-of-work.js';
import { CHAIN_SEND_MACHINE, type ChainSendStatus } from '../domain/machines.js';
import { moveRecord, NOW } from '../domain/transition.js';
import { decideSendReceipt, type SendOutcome } from '../kernel/chain-records.js';
import { inProcessSigner, type Signer, type SigningAccount, type TransactionSigner } from './signer.js';
import { absentAsNull, ChainUnavailableError, scanClientFor, unknownChainAnswer } from './clients.js';
import { TRANSFER_EVENT } from './usdc.js';

// Every transaction the platform signs goes through here: a managed wallet's or deposit address's USDC, and the
// treasury hot wallet's deliveries, refunds and gas top-ups.
//
// - Sent once. A send is named by its reference (our id for what it pays). Under a lock on the sending address (a
//   transaction-scoped advisory lock), the transaction is built, signed and written to chain_sends, and that is
//   committed BEFORE it is broadcast; a retried or restarted job finds the row and checks the chain instead of signing
//   again.
// - Nonces. Parallel sends from one address queue on its lock and take consecutive nonces (after the node's pending
//   count and after our own sends still in flight). A dropped transaction (the node no longer knows it and its nonce is still free)
//   is broadcast again from the stored bytes, same nonce; one whose nonce another transaction took (replaced) is signed
//   again with a fresh nonce, its old hash kept, because any of them may still be the one mined.
// - Chain truth. A send is signed again only on affirmative evidence that it will never be mined: the transaction that
//   took its nonce was found in its block and its receipt read, and it is none of ours. An RPC error is "unknown",
//   never "not found" (absentAsNull): the send is checked again on the next poll, never signed again on a failed read.
// - Funds. USDC and native gas are checked under the lock at a pinned block, less what this address's sends in flight
//   already claim (their USDC; their gas limit at its fee cap and their value). A managed address holding less than
//   this send needs or GAS_TOPUP_MIN_WEI_<CHAIN> beyond that is topped up by the hot wallet to GAS_TOPUP_TARGET_WEI_<CHAIN>
//   (itself a send, named after the one it pays for, made outside the lock), then checked again (and topped up again, a
//   few times at most, when another send of the address claimed the top-up first); else InsufficientGasError.
// - Keys are derived inside signFor for the moment of signing, and never logged, stored or returned.

export type SendPurpose = 'offramp_funding' | 'onramp_delivery' | 'refund' | 'gas_topup' | 'sweep' | 'withdrawal';
export type { Signer } from './signer.js';

export interface SendInput {
  environment: Environment;
  chain: Chain;
  reference: string;
  purpose: SendPurpose;
  signer: Signer;
  to: string;
  asset: 'USDC' | 'native';
  /** Minor units (USDC) or wei; 'all' sends the address's whole spendable USDC (a sweep). */
  amount: bigint | 'all';
}

export interface SendRow {
  id: string;
  environment: Environment;
  chain: Chain;
  reference: string;
  purpose: SendPurpose;
  from_address: string;
  to_address: string;
  /** The signer: a managed or deposit address's HD index, null for the treasury hot wallet. */
  hd_index: number | null;
  asset: 'USDC' | 'native';
  amount: string;
  nonce: string;
  transaction_hash: Hex;
  raw_transaction: Hex;
  replaced_hashes: Hex[];
  status: 'sent' | 'mined' | 'reverted' | 'failed';
  block_number: string | null;
  /** The chain head when it was (last) signed: its nonce was free up to there, so whatever took it was mined later. */
  signed_block: string | null;
}

export interface SenderDeps {
  ds: DataSource;
  config: Config;
  log: Logger;
  /** Who signs (shared/chain/signer.ts); default: in process, from the seeds this process holds. */
  signer?: TransactionSigner;
}

/** The sender holds too little USDC (less what it already has in flight). */
export class ChainFundsError extends Error {
  constructor(readonly address: string, readonly available: bigint, readonly required: bigint) {
    super(`${address} holds ${available} USDC minor units spendable, ${required} required`);
  }
}

/** The sender has too little native gas and the hot wallet cannot (or may not) top it up. */
export class InsufficientGasError extends Error {
  constructor(readonly address: string, readonly balance: bigint, readonly required: bigint, readonly why: string) {
    super(`${address} holds ${balance} wei, ${required} wei needed: ${why}`);
  }
}

/** Broadcast, not mined yet within the wait: the job retries later and finds the same send. */
export class SendPendingError extends Error {}

const ROW = `id::text, environment, chain, reference, purpose, from_address, to_address, hd_index, asset, amount::text, nonce::text, transaction_hash, raw_transaction, replaced_hashes, status, block_number::text, signed_block::text`;
const POLL_MS = 200;
const TRANSFER_GAS_FALLBACK = 100_000n;
const NATIVE_GAS = 21_000n;

const clientOf = (deps: SenderDeps, chain: Chain): PublicClient => scanClientFor(deps.config, chain);
const tokenOf = (deps: SenderDeps, chain: Chain): Address => getAddress(deps.config.chains[chain].usdcAddress);

function signFor(deps: SenderDeps, environment: Environment, signer: Signer): SigningAccount {
  return (deps.signer ?? inProcessSigner(deps.config)).account(environment, signer);
}

export async function findSend(q: Pick<DataSource | EntityManager, 'query'>, environment: Environment, chain: Chain, reference: string): Promise<SendRow | undefined> {
  // A planned send (planned-sends.ts) is not signed yet: send() signs it.
  const rows: SendRow[] = await q.query(`SELECT ${ROW} FROM chain_sends WHERE environment = $1 AND chain = $2 AND reference = $3 AND status <> 'planned'`, [environment, chain, reference]);
  return rows[0];
}

/**
 * The address's sends not yet mined, refreshed from their receipts as of `block`: the USDC they move, and the most
 * native they can still cost (each one's gas limit at its fee cap, plus its value), read from the signed bytes.
 */
async function inFlight(em: EntityManager, client: PublicClient, environment: Environment, chain: Chain, from: string, block: bigint): Promise<{ usdc: bigint; reserved: bigint }> {
  const rows: SendRow[] = await em.query(`SELECT ${ROW} FROM chain_sends WHERE environment = $1 AND chain = $2 AND from_address = $3 AND status = 'sent'`, [environment, chain, from]);
  let usdc = 0n;
  let reserved = 0n;
  for (const row of rows) {
    const receipt = await minedReceipt(client, chain, row);
    if (receipt && receipt.blockNumber <= block) {
      await markMined(em, row, receipt);
      continue;
    }
    if (row.asset === 'USDC') usdc += BigInt(row.amount);
    const signed = parseTransaction(row.raw_transaction);
    reserved += (signed.gas ?? 0n) * (signed.maxFeePerGas ?? signed.gasPrice ?? 0n) + (signed.value ?? 0n);
  }
  return { usdc, reserved };
}

/**
 * What the receipt means for the send (kernel/chain-records.ts), carried out as a compare-and-set from the status the
 * caller read (a send moved on meanwhile is left alone); answers what the receipt says.
 */
async function markMined(q: Pick<DataSource | EntityManager, 'query'>, row: SendRow, receipt: TransactionReceipt): Promise<'mined' | 'reverted'> {
  const fact = { kind: 'receipt', success: receipt.status === 'success', hash: receipt.transactionHash, block: receipt.blockNumber } as const;
  await carryOut(q, row, decideSendReceipt({ id: row.id, status: row.status, blockNumber: row.block_number }, fact));
  return fact.success ? 'mined' : 'reverted';
}

async function carryOut(q: Pick<DataSource | EntityManager, 'query'>, row: SendRow, outcome: SendOutcome): Promise<boolean> {
  if (outcome.kind === 'move') {
    const { from, to, set } = outcome.move as { from: ChainSendStatus; to: ChainSendStatus; set?: Record<string, unknown> };
    return (await moveRecord(q, CHAIN_SEND_MACHINE, { id: row.id, expected: from, to, set })) !== null;
  }
  if (outcome.kind === 'reblocked') {
    // The same status in another block: only where it was found (no status is written).
    await q.query(`UPDATE chain_sends SET transaction_hash = $2, block_number = $3, updated_at = now() WHERE id = $1 AND status = 'mined'`, [row.id, outcome.hash, outcome.block.toString()]);
  }
  return false;
}

/** The receipt of any of the send's hashes; null only when the node answered "no receipt" for every one of them. */
async function minedReceipt(client: PublicClient, chain: Chain, row: SendRow): Promise<TransactionReceipt | null> {
  for (const hash of [row.transaction_hash, ...row.replaced_hashes]) {
    const receipt = await absentAsNull(chain, client.getTransactionReceipt({ hash }));
    if (receipt) return receipt;
  }
  return null;
}

/**
 * Signs and records a send under its address's nonce lock, then broadcasts it. A reference already sent answers its
 * row (checked on the chain by `settle`). 'all' with nothing to send answers null.
 */
export async function send(deps: SenderDeps, input: SendInput): Promise<SendRow | null> {
  const existing = await findSend(deps.ds, input.environment, input.chain, input.reference);
  if (existing) return existing;
  const account = signFor(deps, input.environment, input.signer);
  const from = account.address.toLowerCase();
  const topsUp = input.asset === 'USDC' && input.signer.kind === 'managed';
  if (topsUp) {
    // A top-up sent for this transfer before (a job that stopped while it was being mined): settled first.
    const earlier = await findSend(deps.ds, input.environment, input.chain, topUpReference(input));
    if (earlier?.status === 'sent') await settle(deps, input.chain, earlier);
  }
  let signed = await signUnderLock(deps, input, account, topsUp ? 'minimum' : 'need');
  // Another send of the address may be signed between a top-up and this send's check and claim what the top-up brought:
  // topped up again, GAS_TOPUP_ROUNDS times at most, each top-up under a reference of its own (a restarted job finds
  // each one already sent, and waits for it, rather than sending it twice).
  for (let round = 1; 'short' in signed && topsUp && round <= GAS_TOPUP_ROUNDS; round++) {
    await topUp(deps, input, from, signed.short, round);
    signed = await signUnderLock(deps, input, account, 'need');
  }
  if ('short' in signed) {
    const why = input.signer.kind === 'treasury' ? 'the treasury hot wallet is short of gas' : topsUp ? 'the gas top-up did not cover it' : 'the address is short of gas';
    throw new InsufficientGasError(getAddress(from), signed.short.available, signed.short.needed, why);
  }
  const row = signed.row;
  if (row && row.status === 'sent') await broadcast(deps, input.chain, row);
  return row;
}

/** Native gas an address holds beyond what its sends in flight reserve, against what this send needs. */
interface GasShort { available: bigint; needed: bigint }

/**
 * Under the address's lock: checks funds against what its sends in flight already reserve, then signs and records the
 * send (or finds it recorded by a process that held the lock first). Gas short of `floor` (this send's own need, or
 * for a managed wallet's first pass also GAS_TOPUP_MIN_WEI) answers `short` and records nothing.
 */
async function signUnderLock(deps: SenderDeps, input: SendInput, account: SigningAccount, floor: 'minimum' | 'need'): Promise<{ row: SendRow | null } | { short: GasShort }> {
  const client = clientOf(deps, input.chain);
  const token = tokenOf(deps, input.chain);
  const from = account.address.toLowerCase();
  return deps.ds.transaction(async (em) => {
    await lockSender(em, input.environment, input.chain, from);
    // Another process may have sent it while this one waited for the lock.
    const raced = await findSend(em, input.environment, input.chain, input.reference);
    if (raced) return { row: raced };
    const block = await client.getBlockNumber({ cacheTime: 0 });
    const flight = await inFlight(em, client, input.environment, input.chain, from, block);
    let amount: bigint;
    if (input.asset === 'USDC') {
      const balance = await client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [account.address], blockNumber: block });
      const spendable = balance - flight.usdc;
      amount = input.amount === 'all' ? spendable : input.amount;
      if (input.amount === 'all' && amount <= 0n) return { row: null };
      if (spendable < amount) throw new ChainFundsError(getAddress(from), spendable < 0n ? 0n : spendable, amount);
    } else {
      if (input.amount === 'all') throw new RangeError("'all' is for USDC sweeps");
      amount = input.amount;
    }
    const call = callFor(token, input.asset, input.to, amount);
    // An estimate is only a gas limit: when the node cannot give one, the fallback limit is as good (nothing is decided on it).
    const gas = input.asset === 'USDC'
      ? ((await client.estimateGas({ account: account.address, ...call }).catch(() => TRANSFER_GAS_FALLBACK)) * 12n) / 10n
      : NATIVE_GAS;
    const fees = await client.estimateFeesPerGas();
    // What the address holds as of the block its in-flight sends were read at, less the most each of them can still
    // cost (gas limit at its fee cap, and its value): a second send never counts gas the first has already claimed.
    const available = (await client.getBalance({ address: account.address, blockNumber: block })) - flight.reserved;
    const needed = gas * fees.maxFeePerGas + call.value;
    const min = deps.config.chains[input.chain].gasTopupMinWei;
    const wanted = floor === 'minimum' && min > needed ? min : needed;
    if (available < wanted) return { short: { available, needed: wanted } };
    const signed = await signNext(em, client, account, input.environment, input.chain, { ...call, gas }, fees);
    const hdIndex = input.signer.kind === 'managed' ? input.signer.index : null;
    const signedColumns = { nonce: signed.nonce.toString(), transaction_hash: signed.hash, raw_transaction: signed.raw, signed_block: block.toString(), updated_at: NOW };
    const [planned]: { id: string; purpose: string; from_address: string; to_address: string; hd_index: number | null; asset: string; amount: string }[] = await em.query(
      `SELECT id::text, purpose, from_address, to_address, hd_index, asset, amount::text FROM chain_sends
        WHERE environment = $1 AND chain = $2 AND reference = $3 AND status = 'planned' FOR UPDATE`,
      [input.environment, input.chain, input.reference],
    );
    let id: string;
    if (planned) {
      // A planned send under this reference is signed only as it was recorded: anything else signs nothing.
      const asked = { purpose: input.purpose, from_address: from, to_address: input.to.toLowerCase(), hd_index: hdIndex, asset: input.asset, amount: amount.toString() };
      if ((Object.keys(asked) as (keyof typeof asked)[]).some((k) => planned[k] !== asked[k])) throw new Error(`the send recorded under ${input.reference} is not the one asked for: nothing signed`);
      if (!(await moveRecord(em, CHAIN_SEND_MACHINE, { id: planned.id, expected: 'planned', to: 'sent', set: signedColumns }))) throw new Error(`the send under ${input.reference} moved on while it was signed`);
      id = planned.id;
    } else {
      // Never recorded before (a sweep, a gas top-up, a managed wallet's send): written as sent, its first status.
      const [inserted]: { id: string }[] = await em.query(
        `INSERT INTO chain_sends (environment, chain, reference, purpose, from_address, to_address, hd_index, asset, amount, nonce, transaction_hash, raw_transaction, signed_block)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id::text`,
        [input.environment, input.chain, input.reference, input.purpose, from, input.to.toLowerCase(), hdIndex,
          input.asset, amount.toString(), signed.nonce.toString(), signed.hash, signed.raw, block.toString()],
      );
      id = inserted.id;
    }
    const rows: SendRow[] = await em.query(`SELECT ${ROW} FROM chain_sends WHERE id = $1`, [id]);
    return { row: rows[0] };
  });
}

/** One sender at a time per address (transaction-scoped): its nonces are handed out in order. */
async function lockSender(em: EntityManager, environment: Environment, chain: Chain, from: string): Promise<void> {
  await em.query(`SELECT pg_advisory_xact_lock(hashtext('chain_sends:' || $1 || ':' || $2 || ':' || $3))`, [environment, chain, from]);
}

/** The call of a send: a USDC `transfer`, or native value. */
function callFor(token: Address, asset: 'USDC' | 'native', to: string, amount: bigint): { to: Address; data: Hex | undefined; value: bigint } {
  return asset === 'USDC'
    ? { to: token, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [getAddress(to), amount] }), value: 0n }
    : { to: getAddress(to), data: undefined, value: amount };
}

/**
 * Signs `call` with the next nonce of the account (under its lock): after the node's pending count and after every
 * send of ours still in flight (each is broadcast again by its own job until mined), so nonces stay consecutive and a
 * stale record never opens a gap. `except`: the send being signed again.
 */
async function signNext(
  em: EntityManager,
  client: PublicClient,
  account: SigningAccount,
  environment: Environment,
  chain: Chain,
  call: { to: Address; data: Hex | undefined; value: bigint; gas: bigint },
  fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
  except?: string,
): Promise<{ nonce: bigint; raw: Hex; hash: Hex }> {
  const pending = BigInt(await client.getTransactionCount({ address: account.address, blockTag: 'pending' }));
  const [{ top }]: { top: string | null }[] = await em.query(
    // Every nonce we have signed with, mined ones too: a reorg can take a mined send off the chain (the node's count
    // then goes back), and that send is broadcast again with its own nonce (recheckSends), never overtaken.
    `SELECT max(nonce)::text AS top FROM chain_sends WHERE environment = $1 AND chain = $2 AND from_address = $3 AND id <> coalesce($4::bigint, -1)`,
    [environment, chain, account.address.toLowerCase(), except ?? null],
  );
  const afterOurs = top === null ? 0n : BigInt(top) + 1n;
  const nonce = afterOurs > pending ? afterOurs : pending;
  const raw = await account.signTransaction({
    type: 'eip1559', chainId: CHAIN_IDS[chain], nonce: Number(nonce), maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas, ...call,
  });
  return { nonce, raw, hash: keccak256(raw) };
}

/** Top-ups one send may need when the address's other sends keep claiming the gas before it is signed. */
const GAS_TOPUP_ROUNDS = 3;
const topUpReference = (input: SendInput, round = 1): string => (round === 1 ? `gas-${input.reference}` : `gas-${input.reference}-${round}`);

/**
 * A managed address short of gas for a USDC send: the treasury hot wallet sends it what brings it to
 * GAS_TOPUP_TARGET_WEI beyond its sends in flight (or, where the target is less than this send needs, a quarter over
 * that need, for fees that rise before it is signed), named after the send it pays for, and waits for it to be mined.
 */
async function topUp(deps: SenderDeps, input: SendInput, from: string, short: GasShort, round: number): Promise<void> {
  const target = deps.config.chains[input.chain].gasTopupTargetWei;
  if (target === 0n) throw new InsufficientGasError(getAddress(from), short.available, short.needed, 'gas top-ups are off (GAS_TOPUP_TARGET_WEI is 0)');
  const roomy = short.needed + short.needed / 4n;
  const to = target > roomy ? target : roomy;
  let row: SendRow | null;
  try {
    row = await send(deps, {
      environment: input.environment, chain: input.chain, reference: topUpReference(input, round), purpose: 'gas_topup', signer: { kind: 'treasury' }, to: from, asset: 'native', amount: to - short.available,
    });
  } catch (err) {
    if (err instanceof InsufficientGasError) throw new InsufficientGasError(getAddress(from), short.available, short.needed, 'the treasury hot wallet cannot top it up');
    throw err;
  }
  if (row) await settle(deps, input.chain, row);
  deps.log.info({ chain: input.chain, environment: input.environment, reference: input.reference, topup_hash: row?.transaction_hash }, 'gas topped up from the treasury hot wallet');
}

async function broadcast(deps: SenderDeps, chain: Chain, row: SendRow): Promise<void> {
  try {
    await sendRawTransaction(clientOf(deps, chain), { serializedTransaction: row.raw_transaction });
  } catch (err) {
    // Already in the node's pool or mined (a second broadcast): settle finds it. Anything else is logged; settle
    // broadcasts again while the nonce is free.
    const message = err instanceof Error ? err.message : String(err);
    if (!/already known|known transaction|nonce too low|already imported/i.test(message)) {
      deps.log.warn({ chain, reference: row.reference, transaction_hash: row.transaction_hash, err: message.slice(0, 300) }, 'broadcast refused; will check and retry');
    }
  }
  await deps.ds.query(`UPDATE chain_sends SET broadcasts = broadcasts + 1, updated_at = now() WHERE id = $1`, [row.id]);
}

/**
 * Waits (up to `timeoutMs`) for the send to be mined, broadcasting it again if the node dropped it, or signing it again
 * with a fresh nonce if another transaction took its nonce. Answers the receipt; a revert is an error. A poll whose
 * reads fail decides nothing: the send is read again on the next one (and, past the wait, by the job's next attempt).
 */
export async function settle(deps: SenderDeps, chain: Chain, row: SendRow, timeoutMs = 30_000): Promise<TransactionReceipt> {
  const client = clientOf(deps, chain);
  const deadline = Date.now() + timeoutMs;
  let current = row;
  for (;;) {
    let receipt: TransactionReceipt | null = null;
    try {
      receipt = await minedReceipt(client, chain, current);
      if (!receipt && !(await absentAsNull(chain, client.getTransaction({ hash: current.transaction_hash })))) current = await recover(deps, chain, current);
    } catch (err) {
      if (!(err instanceof ChainUnavailableError)) throw err;
      deps.log.warn({ chain, reference: current.reference, transaction_hash: current.transaction_hash, err: err.message.slice(0, 300) }, 'send state unknown (the chain could not be read); checked again');
    }
    if (receipt) {
      if ((await markMined(deps.ds, current, receipt)) === 'reverted') throw new Error(`send ${current.reference} reverted on chain (${receipt.transactionHash})`);
      return receipt;
    }
    if (Date.now() >= deadline) throw new SendPendingError(`send ${current.reference} not mined yet (${current.transaction_hash})`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** How deep a mined send must be before a reorg is no longer looked for. */
const RECHECK_DEPTH = 64n;
/** How long a send may wait behind a nonce the chain has not used before the watcher looks at that nonce. */
const GAP_AFTER_MS = 30_000;

/**
 * The watcher's pass over our own sends (each scan): a send still `sent` whose job is gone is settled from the chain
 * (mined, or dropped: broadcast again, or replaced: signed again), and a send mined less than RECHECK_DEPTH blocks ago
 * whose receipt is gone (a reorg took its block) is `sent` again and broadcast again with its own bytes and nonce, so
 * what its subject booked still happens on the canonical chain. A read that fails decides nothing for that send, and
 * one send whose check fails never keeps the others from theirs. Then each address whose sends wait behind a nonce
 * the chain has not used (`gapsOf`) has that nonce looked at.
 */
export async function recheckSends(deps: SenderDeps, environment: Environment, chain: Chain): Promise<{ mined: number; reorged: number }> {
  const done = { mined: 0, reorged: 0 };
  // Cheap when there is nothing to look at: one query, no RPC call.
  const candidates: SendRow[] = await deps.ds.query(
    `SELECT ${ROW} FROM chain_sends WHERE environment = $1 AND chain = $2
        AND ((status = 'sent' AND updated_at < now() - interval '5 seconds') OR (status = 'mined' AND updated_at > now() - interval '1 day'))
      ORDER BY nonce LIMIT 500`,
    [environment, chain],
  );
  if (!candidates.length) return done;
  const client = clientOf(deps, chain);
  let head: bigint;
  try {
    head = await client.getBlockNumber({ cacheTime: 0 });
  } catch {
    return done; // unknown: the next scan looks again
  }
  const rows = candidates.filter((r) => r.status === 'sent' || (r.block_number !== null && BigInt(r.block_number) > head - RECHECK_DEPTH));
  for (const row of rows) {
    try {
      const outcome = await recheckOne(deps, chain, client, row);
      if (outcome) done[outcome]++;
    } catch (err) {
      if (!(err instanceof ChainUnavailableError)) deps.log.error({ chain, reference: row.reference, nonce: row.nonce, err: errorText(err) }, 'a send could not be checked; the others were');
    }
  }
  try {
    await fillGaps(deps, environment, chain, client);
  } catch (err) {
    if (!(err instanceof ChainUnavailableError)) deps.log.error({ chain, err: errorText(err) }, 'the nonce gap check failed; the next scan looks again');
  }
  return done;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 300);

/** One send checked against the chain: what changed ('mined', 'reorged') or nothing. */
async function recheckOne(deps: SenderDeps, chain: Chain, client: PublicClient, row: SendRow): Promise<'mined' | 'reorged' | null> {
  const receipt = await minedReceipt(client, chain, row);
  if (receipt) {
    if (row.status === 'sent' || String(receipt.blockNumber) !== String(row.block_number)) {
      await markMined(deps.ds, row, receipt);
      return 'mined';
    }
    return null;
  }
  const known = await absentAsNull(chain, client.getTransaction({ hash: row.transaction_hash }));
  if (row.status === 'mined') {
    // Not "not found" on a node's word alone: a node that knows the transaction as mined (a lagging or inconsistent
    // one, its receipt not there yet) is asked again next pass. Unknown, or known but waiting in its pool again (its
    // block left the chain): gone from the chain, broadcast again.
    if (known && known.blockNumber !== null) return null;
    await reorgedOff(deps, chain, row);
    return 'reorged';
  }
  if (!known) await recover(deps, chain, row);
  return null;
}

/** A mined send whose block left the chain: `sent` again, and broadcast again with its own bytes and nonce. */
async function reorgedOff(deps: SenderDeps, chain: Chain, row: SendRow): Promise<void> {
  deps.log.warn({ chain, reference: row.reference, transaction_hash: row.transaction_hash, nonce: row.nonce, block_number: row.block_number }, 'a reorg took a mined send off the chain; broadcasting it again');
  if (await carryOut(deps.ds, row, decideSendReceipt({ id: row.id, status: row.status, blockNumber: row.block_number }, { kind: 'gone' }))) await broadcast(deps, chain, row);
}

/**
 * Sends of an address wait behind the first nonce its chain count has not used (a nonce gap): each is mined only
 * after it. For an address whose sends have waited GAP_AFTER_MS, the send of ours holding that nonce is looked at
 * whatever its status and age: one recorded as mined is gone from the chain by the count's word (and its receipt's),
 * and is broadcast again; one still sent is broadcast again. A nonce none of our sends holds is logged for an
 * operator (with the address and the nonce): nothing is signed to fill it here.
 */
async function fillGaps(deps: SenderDeps, environment: Environment, chain: Chain, client: PublicClient): Promise<void> {
  const waiting: { from_address: string; lowest: string }[] = await deps.ds.query(
    `SELECT from_address, min(nonce)::text AS lowest FROM chain_sends
      WHERE environment = $1 AND chain = $2 AND status = 'sent' AND created_at < now() - make_interval(secs => $3)
      GROUP BY from_address`,
    [environment, chain, GAP_AFTER_MS / 1000],
  );
  for (const { from_address: from, lowest } of waiting) {
    const used = BigInt(await client.getTransactionCount({ address: getAddress(from), blockTag: 'latest' }).catch((err: unknown) => { throw unknownChainAnswer(chain, err); }));
    if (used >= BigInt(lowest)) continue; // the waiting send's own nonce is next (or used): nothing in front of it
    const [holder]: SendRow[] = await deps.ds.query(
      `SELECT ${ROW} FROM chain_sends WHERE environment = $1 AND chain = $2 AND from_address = $3 AND nonce = $4`,
      [environment, chain, from, used.toString()],
    );
    if (!holder) {
      deps.log.error({ chain, environment, address: from, nonce: used.toString(), waiting_from: lowest }, 'a nonce gap: sends wait behind a nonce none of our sends holds; an operator must fill it');
      continue;
    }
    if (await minedReceipt(client, chain, holder)) continue; // mined after all (a lagging count): nothing missing
    if (holder.status === 'mined') await reorgedOff(deps, chain, holder);
    else if (holder.status === 'sent') await broadcast(deps, chain, holder);
    else deps.log.error({ chain, environment, address: from, nonce: holder.nonce, reference: holder.reference, status: holder.status }, 'a nonce gap: the send holding it is no longer on the chain; an operator must fill it');
  }
}

/**
 * Not known to the node: dropped (its nonce still free: broadcast the same bytes), mined after all (the transaction
 * that took its nonce is ours: its receipt is read on the next poll), or replaced (that transaction is another's, its
 * receipt read: sign again). Reads that fail throw ChainUnavailableError: nothing is decided.
 */
async function recover(deps: SenderDeps, chain: Chain, row: SendRow): Promise<SendRow> {
  const client = clientOf(deps, chain);
  const used = BigInt(await client.getTransactionCount({ address: getAddress(row.from_address), blockTag: 'latest' }).catch((err: unknown) => { throw unknownChainAnswer(chain, err); }));
  if (used <= BigInt(row.nonce)) {
    deps.log.warn({ chain, reference: row.reference, transaction_hash: row.transaction_hash, nonce: row.nonce }, 'send dropped by the node; broadcasting it again');
    await broadcast(deps, chain, row);
    return row;
  }
  const taker = await nonceTaker(client, chain, row);
  if ([row.transaction_hash, ...row.replaced_hashes].includes(taker.hash)) return row; // ours, mined: the next poll reads it
  deps.log.warn({ chain, reference: row.reference, transaction_hash: row.transaction_hash, nonce: row.nonce, replaced_by: taker.hash, replaced_in_block: taker.blockNumber.toString() },
    'send replaced: another transaction took its nonce (its receipt read); signing it again with a new nonce');
  const resigned = await deps.ds.transaction(async (em) => {
    await lockSender(em, row.environment, chain, row.from_address);
    const [locked]: SendRow[] = await em.query(`SELECT ${ROW} FROM chain_sends WHERE id = $1 FOR UPDATE`, [row.id]);
    if (locked.transaction_hash !== row.transaction_hash) return locked; // someone re-signed it meanwhile
    const account = signFor(deps, row.environment, row.hd_index === null ? { kind: 'treasury' } : { kind: 'managed', index: row.hd_index });
    const call = callFor(tokenOf(deps, chain), row.asset, row.to_address, BigInt(row.amount));
    const gas = row.asset === 'USDC' ? (TRANSFER_GAS_FALLBACK * 12n) / 10n : NATIVE_GAS;
    const head = await client.getBlockNumber({ cacheTime: 0 });
    const signed = await signNext(em, client, account, row.environment, chain, { ...call, gas }, await client.estimateFeesPerGas(), row.id);
    const rows = await updateReturning<SendRow>(em,
      `UPDATE chain_sends SET replaced_hashes = replaced_hashes || transaction_hash, transaction_hash = $2, raw_transaction = $3, nonce = $4, signed_block = $5, updated_at = now()
        WHERE id = $1 RETURNING ${ROW}`,
      [row.id, signed.hash, signed.raw, signed.nonce.toString(), head.toString()],
    );
    return rows[0];
  });
  await broadcast(deps, chain, resigned);
  return resigned;
}

/**
 * The transaction that took the send's nonce, read from the chain: the first block whose account nonce passed it
 * (a binary search from the block the send was signed at, its nonce still free there), that block's transaction from
 * the sender with that nonce, and its receipt. Anything missing or unreadable on the way: ChainUnavailableError.
 */
async function nonceTaker(client: PublicClient, chain: Chain, row: SendRow): Promise<{ hash: Hex; blockNumber: bigint }> {
  const address = getAddress(row.from_address);
  const nonce = BigInt(row.nonce);
  try {
    const countAt = async (blockNumber: bigint) => BigInt(await client.getTransactionCount({ address, blockNumber }));
    let lo = row.signed_block === null ? 0n : BigInt(row.signed_block);
    let hi = await client.getBlockNumber({ cacheTime: 0 });
    if ((await countAt(hi)) <= nonce) throw new ChainUnavailableError(chain, `the nonce ${nonce} of ${address} reads as used at latest but free at block ${hi}`);
    while (lo < hi) {
      const mid = (lo + hi) / 2n;
      if ((await countAt(mid)) > nonce) hi = mid;
      else lo = mid + 1n;
    }
    const block = await client.getBlock({ blockNumber: lo, includeTransactions: true });
    const taker = block.transactions.find((t) => t.from.toLowerCase() === row.from_address && BigInt(t.nonce) === nonce);
    if (!taker) throw new ChainUnavailableError(chain, `no transaction of ${address} with nonce ${nonce} in block ${lo}`);
    const receipt = await client.getTransactionReceipt({ hash: taker.hash });
    return { hash: receipt.transactionHash, blockNumber: receipt.blockNumber };
  } catch (err) {
    throw unknownChainAnswer(chain, err);
  }
}

/** Sends (or finds the send) and waits for it to be mined. */
export async function sendAndSettle(deps: SenderDeps, input: SendInput, timeoutMs?: number): Promise<{ row: SendRow; receipt: TransactionReceipt } | null> {
  const row = await send(deps, input);
  if (!row) return null;
  return { row, receipt: await settle(deps, input.chain, row, timeoutMs) };
}

/** The USDC Transfer log of a mined send (where it landed: log index, block and its hash). */
export function transferLogOf(receipt: TransactionReceipt, token: string, to: string): { logIndex: number; blockNumber: bigint; blockHash: Hex; value: bigint } | null {
  const log = parseEventLogs({ abi: [TRANSFER_EVENT], logs: receipt.logs, strict: true })
    .find((l) => l.address.toLowerCase() === token.toLowerCase() && l.args.to.toLowerCase() === to.toLowerCase());
  return log ? { logIndex: log.logIndex!, blockNumber: log.blockNumber!, blockHash: log.blockHash!, value: log.args.value } : null;
}
