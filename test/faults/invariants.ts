// What a fault run must never break, read after the run from the chain, the stand-ins' truth (as the Daraja relays
// recorded it; MTN MoMo's own status of every request it accepted), and the database. Each invariant answers held or
// violated, with examples. Every reading is lenient where the harness cannot know a moment exactly (a block's depth
// at a time is bounded from both sides), so that a violation is the service's, never the harness's timing.
import { erc20Abi, parseEventLogs, type Hex } from 'viem';
import { getDs } from '../helpers/shared.js';
import { findLedgerInconsistencies } from '../../shared/domain/ledger.js';
import { reconcileChain, type AddressDrift } from '../../shared/chain/reconcile.js';
import { loadConfig } from '../../shared/config.js';
import { logger } from '../../shared/logger.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import type { Lifecycle } from './lifecycles.js';
import type { AcceptedMomo, MomoProduct } from './momo-faults.js';
import { CONFIRMATIONS, type World } from './world.js';

export interface Verdict {
  name: string;
  held: boolean;
  checked: number;
  examples: string[];
}

/** The run's facts, gathered once. */
export interface Facts {
  world: World;
  lives: Lifecycle[];
  runStarted: Date;
  /** Canonical USDC Transfer logs of the final chain (lower-case addresses). */
  transfers: { from: string; to: string; value: bigint; block: bigint; hash: string }[];
  /** The exits the run operated on transactions left in action_required: id -> what was tried and what it answered. */
  exits: Map<string, string[]>;
  /** The hot wallet's chain-minus-ledger before any lifecycle ran (its float, and what earlier runs left in its account). */
  hotDriftAtStart: bigint;
}

const minor = (v: string | null | undefined) => (v ? toMinor(String(v), USDC_SCALE) : 0n);
const digits = (s: string) => s.replace(/\D/g, '');

export async function gatherTransfers(world: World): Promise<Facts['transfers']> {
  const logs = await world.anvil.publicClient.getLogs({ address: world.token, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: erc20Abi, logs, eventName: 'Transfer' }).map((l) => ({
    from: l.args.from.toLowerCase(), to: l.args.to.toLowerCase(), value: l.args.value, block: l.blockNumber, hash: l.transactionHash,
  }));
}

function verdict(name: string, checked: number, examples: string[]): Verdict {
  return { name, held: examples.length === 0, checked, examples };
}

async function transactionsOf(facts: Facts, withIntentPayouts = false): Promise<Record<string, any>[]> {
  const ids = facts.lives.flatMap((l) => l.transactions);
  if (withIntentPayouts) {
    const payouts: { id: string }[] = await (await getDs()).query(
      `SELECT payout_transaction_id::text AS id FROM payment_intents WHERE id = ANY($1) AND payout_transaction_id IS NOT NULL`, [facts.lives.flatMap((l) => l.intents)]);
    ids.push(...payouts.map((p) => p.id));
  }
  return (await getDs()).query(
    `SELECT t.id::text, t.environment, t.direction, t.status, t.total_required::text, t.wallet_address, t.funding_type, t.failure, t.refund || jsonb_build_object('status', t.refund_status) AS refund, t.receipt,
            s.to_address AS settlement_address
       FROM transactions t LEFT JOIN settlements s ON s.transaction_id = t.id WHERE t.id = ANY($1)`, [ids]);
}

/** MTN's own status of a request it accepted (its status GET, asked of the stand-in), else what the relayed GETs said. */
function momoStatus(world: World, referenceId: string): { status: string; financialTransactionId: string | null } | null {
  const said = world.momoFake.statusOf(referenceId);
  return said ? { status: said.status, financialTransactionId: said.financialTransactionId ?? null } : world.momo.verdicts.get(referenceId) ?? null;
}

/** The MoMo requests of a product MTN accepted that `match` picks and MTN says SUCCESSFUL (money moved). */
function momoSucceeded(world: World, product: MomoProduct, match: (r: AcceptedMomo) => boolean): AcceptedMomo[] {
  return world.momo.requests.filter((r) => r.product === product && match(r) && momoStatus(world, r.referenceId)?.status === 'SUCCESSFUL');
}

/** 1. Every provider payout executed at most once, and a payout that executed is never also refunded. */
export async function payoutsExecutedAtMostOnce(facts: Facts): Promise<Verdict> {
  const { daraja, momo, momoFake } = facts.world;
  const examples: string[] = [];
  const rows = await transactionsOf(facts);
  const intents: { id: string; payout_transaction_id: string | null }[] = await (await getDs()).query(
    `SELECT id::text, payout_transaction_id::text FROM payment_intents WHERE id = ANY($1)`, [facts.lives.flatMap((l) => l.intents)]);
  const references = new Map<string, Record<string, any> | null>(rows.filter((t) => t.direction === 'offramp' && t.environment === 'live').map((t) => [t.id, t]));
  for (const i of intents) if (i.payout_transaction_id) references.set(i.payout_transaction_id, null);
  for (const [reference, tx] of references) {
    const accepted = daraja.payouts.filter((p) => p.reference === reference);
    const executed = accepted.filter((p) => daraja.outcomes.get(p.conversationId) === '0');
    if (executed.length > 1) examples.push(`${reference}: executed ${executed.length} times (ConversationIDs ${executed.map((p) => p.conversationId).join(', ')})`);
    if (executed.length >= 1 && tx && tx.status === 'failed') examples.push(`${reference}: paid out by M-Pesa, yet failed with refund ${JSON.stringify(tx.refund)} (${tx.failure?.code})`);
    const transfers = momoSucceeded(facts.world, 'disbursement', (r) => r.externalId === reference);
    if ((transfers.length || momoFake.executions.get(reference)) && tx && tx.status === 'failed') examples.push(`${reference}: paid out by MTN MoMo, yet failed with refund ${JSON.stringify(tx.refund)} (${tx.failure?.code})`);
  }
  // MTN: at most one SUCCESSFUL transfer per externalId, whichever X-Reference-Ids it went under (the relay's record
  // and the stand-in's own count of money moved).
  const externalIds = new Set(momo.requests.filter((r) => r.product === 'disbursement').map((r) => r.externalId));
  for (const externalId of externalIds) {
    const paid = momoSucceeded(facts.world, 'disbursement', (r) => r.externalId === externalId);
    const ran = Math.max(paid.length, momoFake.executions.get(externalId) ?? 0);
    if (ran > 1) examples.push(`${externalId}: MTN MoMo ran ${ran} transfers (X-Reference-Ids ${paid.map((r) => r.referenceId).join(', ')})`);
  }
  // Sandbox payouts: the simulated provider's own count.
  const sandbox: { reference: string; evaluations: number }[] = await (await getDs()).query(
    `SELECT reference, evaluations FROM provider_requests WHERE kind = 'payout' AND reference = ANY($1) AND evaluations > 1`, [rows.filter((t) => t.environment === 'sandbox').map((t) => t.id)]);
  for (const s of sandbox) examples.push(`${s.reference}: sandbox payout evaluated ${s.evaluations} times`);
  const checked = new Set([...references.keys(), ...externalIds]).size + rows.filter((t) => t.environment === 'sandbox').length;
  return verdict('every provider payout executed at most once (and never also refunded)', checked, examples);
}

/** 2. No purpose (delivery, refund, sweep, top-up) sent on chain twice. */
export async function noPurposeSentTwice(facts: Facts): Promise<Verdict> {
  const examples: string[] = [];
  const sends: { purpose: string; reference: string; hashes: string[]; mined: number }[] = await (await getDs()).query(
    `SELECT purpose, reference, array_agg(transaction_hash) || array_agg(h) FILTER (WHERE h IS NOT NULL) AS hashes, count(*) FILTER (WHERE status = 'mined')::int AS mined
       FROM chain_sends LEFT JOIN LATERAL unnest(replaced_hashes) h ON true
      WHERE environment = 'live' AND chain = 'base' AND created_at >= $1 GROUP BY purpose, reference`, [facts.runStarted]);
  const { publicClient } = facts.world.anvil;
  for (const send of sends) {
    const hashes = [...new Set(send.hashes.filter(Boolean))];
    const receipts = await Promise.all(hashes.map((hash) => publicClient.getTransactionReceipt({ hash: hash as Hex }).catch(() => null)));
    const minedOnChain = receipts.filter((r) => r?.status === 'success').length;
    if (send.mined > 1 || minedOnChain > 1) examples.push(`${send.purpose} ${send.reference}: ${send.mined} rows mined, ${minedOnChain} of its transactions mined on chain`);
  }
  // From the chain alone: the hot wallet pays each on-ramp's fresh destination wallet, and each external payer, once.
  const rows = await transactionsOf(facts);
  const hot = facts.world.hot.toLowerCase();
  for (const t of rows.filter((r) => r.environment === 'live' && r.direction === 'onramp' && r.wallet_address)) {
    const n = facts.transfers.filter((x) => x.from === hot && x.to === t.wallet_address.toLowerCase()).length;
    if (n > 1) examples.push(`on-ramp ${t.id}: ${n} USDC deliveries from the hot wallet on chain`);
  }
  // Each external payer: every refund on chain is one recorded refund send (a payer can be owed several: an underpaid
  // transfer returned, then a late one), and together they never return more than the payer sent beyond what a
  // completed payout used.
  const refundRows: { to_address: string; n: number }[] = await (await getDs()).query(
    `SELECT to_address, count(*)::int AS n FROM chain_sends WHERE environment = 'live' AND chain = 'base' AND purpose = 'refund' AND status = 'mined' AND created_at >= $1 GROUP BY to_address`,
    [facts.runStarted]);
  for (const life of facts.lives.filter((l) => l.kind.startsWith('offramp_external'))) {
    for (const payer of life.payers) {
      const refunds = facts.transfers.filter((x) => x.from === hot && x.to === payer);
      const recorded = refundRows.find((r) => r.to_address === payer)?.n ?? 0;
      const paidIn = facts.transfers.filter((x) => x.from === payer).reduce((s, x) => s + x.value, 0n);
      const used = rows.filter((t) => life.transactions.includes(t.id) && t.status === 'completed').reduce((s, t) => s + minor(t.total_required), 0n);
      const returned = refunds.reduce((s, x) => s + x.value, 0n);
      if (refunds.length > recorded) examples.push(`external payer ${payer}: ${refunds.length} refunds from the hot wallet on chain, ${recorded} recorded`);
      if (returned > paidIn - used) examples.push(`external payer ${payer}: ${returned} returned on chain, but paid ${paidIn} of which ${used} was used`);
    }
  }
  return verdict('no purpose (delivery, refund, sweep, top-up) sent on chain twice', sends.length, examples);
}

/** The head at `at`, bounded: the newest sample before it, and the highest head seen up to the first sample after. */
function headsAround(world: World, at: number): { before: bigint | null; after: bigint | null } {
  let before: bigint | null = null;
  let after: bigint | null = null;
  for (const s of world.heads) {
    if (s.at <= at) before = s.head;
    else {
      after = s.head > (before ?? 0n) ? s.head : before;
      break;
    }
  }
  return { before, after: after ?? before };
}

/** 3. No payout before its transfers are deep enough: at `funded`, every transfer counted had CONFIRMATIONS. */
export async function noPayoutBeforeDepth(facts: Facts): Promise<Verdict> {
  const examples: string[] = [];
  const rows = (await transactionsOf(facts)).filter((t) => t.environment === 'live' && t.direction === 'offramp' && t.settlement_address);
  const funded: { resource_id: string; created_at: Date }[] = await (await getDs()).query(
    `SELECT resource_id::text, created_at FROM status_history WHERE resource_type = 'transaction' AND to_status = 'funded' AND resource_id = ANY($1)`, [rows.map((t) => t.id)]);
  let checked = 0;
  for (const f of funded) {
    const t = rows.find((r) => r.id === f.resource_id)!;
    const at = new Date(f.created_at).getTime();
    const { before, after } = headsAround(facts.world, at);
    if (before === null || after === null) continue;
    // Only transfers certainly mined before the decision; the depth is the most the head can have been.
    const counted = facts.transfers.filter((x) => x.to === t.settlement_address.toLowerCase() && x.block <= before);
    checked++;
    if (!counted.length) {
      examples.push(`${t.id}: funded at ${new Date(at).toISOString()} with no transfer to ${t.settlement_address} on the final chain by then`);
      continue;
    }
    const last = counted.reduce((m, x) => (x.block > m ? x.block : m), 0n);
    const depth = after - last + 1n;
    if (depth < BigInt(CONFIRMATIONS)) examples.push(`${t.id}: funded with its last transfer (block ${last}) at most ${depth} deep of ${CONFIRMATIONS}`);
  }
  const deposits: { id: string; transaction_hash: string; block_number: string; confirmed_at: Date }[] = await (await getDs()).query(
    // When the move was written (status history's clock), not confirmed_at: that is its unit's start, before the chain
    // reads the decision rests on, so the head then could be lower than the one the decision saw.
    `SELECT d.id::text, d.transaction_hash, d.block_number::text, h.created_at AS confirmed_at FROM treasury_deposits d
       JOIN status_history h ON h.resource_id = d.id AND h.to_status = 'confirmed'
      WHERE d.payment_intent_id = ANY($1) AND d.status = 'confirmed' AND d.transaction_hash IS NOT NULL`,
    [facts.lives.flatMap((l) => l.intents)]);
  for (const d of deposits) {
    checked++;
    const onChain = facts.transfers.find((x) => x.hash === d.transaction_hash);
    if (!onChain) {
      examples.push(`treasury deposit ${d.id}: confirmed, but ${d.transaction_hash} is not on the final chain`);
      continue;
    }
    const { after } = headsAround(facts.world, new Date(d.confirmed_at).getTime());
    if (after !== null && after - onChain.block + 1n < BigInt(CONFIRMATIONS)) examples.push(`treasury deposit ${d.id}: confirmed at most ${after - onChain.block + 1n} deep of ${CONFIRMATIONS}`);
  }
  return verdict('no payout before its transfers are deep enough', checked, examples);
}

/** Collections the stand-ins said succeeded (M-Pesa prompts, MoMo requests to pay), for the phones of a lifecycle. */
function collectionsPaid(world: World, phones: string[]): number {
  const ours = new Set(phones.map(digits));
  const mpesa = world.daraja.collections.filter((c) => ours.has(digits(c.phone)) && world.daraja.outcomes.get(c.checkoutRequestId) === '0').length;
  return mpesa + momoSucceeded(world, 'collection', (r) => ours.has(digits(r.phone))).length;
}

/** 4. Every payment the payer made is credited exactly once (paid out or returned, never kept, never twice). */
export async function everyPaymentCreditedOnce(facts: Facts): Promise<Verdict> {
  const examples: string[] = [];
  const ds = await getDs();
  const rows = await transactionsOf(facts);
  let checked = 0;
  for (const t of rows.filter((r) => r.environment === 'live')) {
    checked++;
    if (t.direction === 'offramp') {
      const address = t.settlement_address?.toLowerCase();
      const paidIn = facts.transfers.filter((x) => x.to === address).reduce((s, x) => s + x.value, 0n);
      if (t.status === 'action_required' || paidIn === 0n && t.status !== 'completed') continue; // invariant 5's to judge
      const out = (t.status === 'completed' ? minor(t.total_required) : 0n) + (t.refund?.status === 'completed' ? minor(t.refund.amount) : 0n);
      if (out !== paidIn) examples.push(`off-ramp ${t.id} (${t.status}${t.failure ? ` ${t.failure.code}` : ''}): payer sent ${paidIn}, paid out + returned ${out} (refund ${JSON.stringify(t.refund)})`);
    } else {
      const life = facts.lives.find((l) => l.transactions.includes(t.id))!;
      const paid = collectionsPaid(facts.world, life.phones);
      const delivered = facts.transfers.filter((x) => x.from === facts.world.hot.toLowerCase() && x.to === t.wallet_address?.toLowerCase()).length;
      const fiatReturned = t.refund && ['pending', 'completed'].includes(t.refund.status);
      if (paid === 0 && delivered > 0) examples.push(`on-ramp ${t.id}: USDC delivered ${delivered} times for a collection the provider never made`);
      if (paid > 0 && delivered === 0 && !fiatReturned) examples.push(`on-ramp ${t.id} (${t.status}${t.failure ? ` ${t.failure.code}` : ''}): the payer paid ${paid} time(s) by mobile money, nothing delivered or returned`);
      if (paid > 1 && !fiatReturned) examples.push(`on-ramp ${t.id}: the payer was charged ${paid} times, delivered ${delivered}`);
    }
  }
  for (const life of facts.lives) {
    for (const intentId of life.intents) {
      checked++;
      const [intent]: { status: string; address: string | null }[] = await ds.query(`SELECT status, deposit_address AS address FROM payment_intents WHERE id = $1`, [intentId]).catch(() => [{ status: '?', address: null }]);
      const deposits: { payment_method: string; status: string; transaction_hash: string | null }[] = await ds.query(
        `SELECT payment_method, status, transaction_hash FROM treasury_deposits WHERE payment_intent_id = $1`, [intentId]);
      const mpesaPaid = collectionsPaid(facts.world, life.phones);
      const mpesaCredited = deposits.filter((d) => d.payment_method !== 'stablecoin' && d.status === 'confirmed').length;
      if (mpesaPaid !== mpesaCredited) examples.push(`intent ${intentId} (${intent?.status}): ${mpesaPaid} mobile money payment(s) made, ${mpesaCredited} credited`);
      const address = intent?.address?.toLowerCase();
      const usdcPaid = address ? facts.transfers.filter((x) => x.to === address) : [];
      const credited = deposits.filter((d) => d.payment_method === 'stablecoin' && d.status === 'confirmed');
      for (const x of usdcPaid) {
        const n = credited.filter((d) => d.transaction_hash === x.hash).length;
        if (n !== 1) examples.push(`intent ${intentId}: USDC transfer ${x.hash} (${x.value}) credited ${n} times`);
      }
      for (const d of credited) if (!usdcPaid.some((x) => x.hash === d.transaction_hash)) examples.push(`intent ${intentId}: deposit ${d.transaction_hash} credited but not on the final chain`);
    }
  }
  // A treasury withdrawal: completed, its USDC on chain exactly once; failed, nothing sent (the amount is back).
  const withdrawals: { id: string; status: string; amount: string; wallet: string }[] = await ds.query(
    `SELECT w.id::text, w.status, w.amount::text, lower(x.address) AS wallet FROM treasury_withdrawals w JOIN wallets x ON x.id = w.wallet_id WHERE w.id = ANY($1)`,
    [facts.lives.flatMap((l) => l.withdrawals)]);
  for (const w of withdrawals) {
    checked++;
    const sent = facts.transfers.filter((x) => x.from === facts.world.hot.toLowerCase() && x.to === w.wallet);
    const expected = w.status === 'completed' ? 1 : 0;
    if (sent.length !== expected || (expected && sent[0].value !== minor(w.amount))) {
      examples.push(`treasury withdrawal ${w.id} (${w.status}, ${w.amount}): ${sent.length} transfer(s) from the hot wallet on chain (${sent.map((x) => x.value).join(', ')})`);
    }
  }
  return verdict('every payment the payer made credited exactly once', checked, examples);
}

/** Beyond a prompt's whole check schedule in the run's settings (DARAJA_STATUS_QUERY_AFTER_MS 1.5 s) and the sweeper's. */
const INTENT_STUCK_SECONDS = 150;

/**
 * 5. Every transaction ends completed, failed with its refund completed (when it held money), or action_required
 * with an exit that then worked; every intent leaves processing, and every intent payout and treasury deposit ends.
 */
export async function everyTransactionEnds(facts: Facts): Promise<Verdict> {
  const examples: string[] = [];
  const rows = await transactionsOf(facts);
  for (const t of rows) {
    const tried = facts.exits.get(t.id);
    const how = tried ? ` after ${tried.join(', ')}` : '';
    if (t.status === 'completed') {
      if (t.refund && t.refund.status !== 'completed') examples.push(`${t.id}: completed with refund ${t.refund.status}`);
    } else if (t.status === 'failed') {
      const held = t.direction === 'offramp'
        ? facts.transfers.some((x) => x.to === t.settlement_address?.toLowerCase()) || t.funding_type === 'managed_wallet' && t.failure?.code !== 'insufficient_funds'
        : false;
      if (t.refund && t.refund.status !== 'completed') examples.push(`${t.id}: failed (${t.failure?.code}) with refund ${t.refund.status}${how}`);
      else if (held && !t.refund && t.environment === 'live' && t.funding_type !== 'managed_wallet') examples.push(`${t.id}: failed (${t.failure?.code}) holding USDC, nothing refunded${how}`);
    } else if (t.status === 'action_required') {
      examples.push(`${t.id}: action_required (${t.failure?.code})${how || ' with no exit offered'}`);
    } else {
      examples.push(`${t.id} (${t.direction}): stuck in ${t.status}${how}`);
    }
  }
  const ds = await getDs();
  const intents: { id: string; status: string; payout_status: string | null; payout_error: string | null; waited: number }[] = await ds.query(
    `SELECT id::text, status, payout_status, payout_error, extract(epoch FROM now() - updated_at)::int AS waited FROM payment_intents WHERE id = ANY($1)`,
    [facts.lives.flatMap((l) => l.intents)]);
  for (const i of intents) {
    // A prompt's checks end within about a minute and a half (INTENT_CHECK_ROUNDS): longer in processing is stuck.
    if (i.status === 'processing' && i.waited > INTENT_STUCK_SECONDS) examples.push(`intent ${i.id}: stuck in processing for ${i.waited} s`);
    if (i.payout_status && i.payout_status !== 'completed') examples.push(`intent ${i.id} (${i.status}): payout ${i.payout_status}${i.payout_error ? ` (${i.payout_error})` : ''}`);
  }
  const pending: { id: string; payment_intent_id: string }[] = await ds.query(
    `SELECT id::text, payment_intent_id::text FROM treasury_deposits WHERE payment_intent_id = ANY($1) AND status = 'pending'`, [intents.map((i) => i.id)]);
  for (const d of pending) examples.push(`treasury deposit ${d.id} of intent ${d.payment_intent_id}: still pending`);
  const withdrawals: { id: string; status: string }[] = await ds.query(
    `SELECT id::text, status FROM treasury_withdrawals WHERE id = ANY($1) AND status = 'pending'`, [facts.lives.flatMap((l) => l.withdrawals)]);
  for (const w of withdrawals) examples.push(`treasury withdrawal ${w.id}: still pending`);
  return verdict('every transaction ends completed, failed with its refund completed, or action_required with a working exit', rows.length + intents.length, examples);
}

/** Each managed wallet's and the hot wallet's chain balance against its ledger account (the service's own reconciliation, read straight from Anvil). */
export async function chainDrifts(world: World): Promise<AddressDrift[]> {
  const config = loadConfig({ ...process.env, RPC_URL_BASE: world.anvil.rpcUrl, USDC_ADDRESS_BASE: world.token });
  const drifts = await reconcileChain({ ds: await getDs(), config, log: logger() }, 'live', 'base');
  if (drifts === 'not configured') throw new Error('the ledger/chain reconciliation is not configured');
  return drifts;
}

/** 6. The ledger balances, and equals the chain for every managed wallet of the run and the hot wallet. */
export async function ledgerBalancesAndMatchesChain(facts: Facts): Promise<Verdict> {
  const ds = await getDs();
  const examples: string[] = [];
  const found = await findLedgerInconsistencies(ds, { entriesSince: facts.runStarted });
  for (const e of found.unbalancedEntries.slice(0, 5)) examples.push(`unbalanced entry ${JSON.stringify(e)}`);
  for (const a of found.driftedAccounts.slice(0, 5)) examples.push(`stored balance differs from its postings: ${JSON.stringify(a)}`);
  const { world } = facts;
  const drifts = await chainDrifts(world);
  const ours = new Set((await ds.query(`SELECT lower(address) AS address FROM wallets WHERE business_id = $1 AND environment = 'live' AND type = 'managed_wallet'`, [world.businessId]) as { address: string }[]).map((w) => w.address));
  let checked = 0;
  for (const d of drifts) {
    const address = d.address.toLowerCase();
    if (d.kind === 'treasury') {
      checked++;
      // The hot wallet's ledger account outlives a run (same address, same database): what must hold is that the run
      // changed its chain balance and its ledger balance alike.
      if (d.drift !== facts.hotDriftAtStart) examples.push(`hot wallet ${address}: chain ${d.chain_balance}, ledger ${d.ledger_balance}: drift ${d.drift - facts.hotDriftAtStart} beyond the drift at the run's start`);
    } else if (ours.has(address)) {
      checked++;
      if (d.drift !== 0n) examples.push(`managed wallet ${address}: chain ${d.chain_balance}, ledger ${d.ledger_balance}`);
    }
  }
  return verdict('the ledger balances and equals the chain (managed wallets, hot wallet)', checked, examples);
}

/**
 * 7. MTN MoMo: every transaction MoMo was asked about (intents' payouts too) agrees with MTN's own verdict, so no
 * forged or contradicting callback moved one. Completed: exactly one of its requests SUCCESSFUL, and its receipt is
 * that request's financialTransactionId (a forged success carries another). An off-ramp not completed: none paid. An
 * on-ramp failed as declined or timed out: none collected.
 */
export async function momoAgreesWithMtn(facts: Facts): Promise<Verdict> {
  const examples: string[] = [];
  let checked = 0;
  for (const t of (await transactionsOf(facts, true)).filter((r) => r.environment === 'live')) {
    const product: MomoProduct = t.direction === 'onramp' ? 'collection' : 'disbursement';
    const sent = facts.world.momo.requests.filter((r) => r.product === product && r.externalId === t.id);
    if (!sent.length) continue;
    checked++;
    const paid = momoSucceeded(facts.world, product, (r) => r.externalId === t.id);
    const said = `${paid.length} of its ${sent.length} MoMo request(s) SUCCESSFUL at MTN`;
    if (t.status === 'completed') {
      const receipt = paid.length === 1 ? momoStatus(facts.world, paid[0].referenceId)?.financialTransactionId : null;
      if (paid.length !== 1) examples.push(`${t.id} (${t.direction}) completed with ${said}`);
      else if (t.receipt !== receipt) examples.push(`${t.id} (${t.direction}) completed with receipt ${t.receipt}, MTN's financialTransactionId is ${receipt}`);
    } else if (t.direction === 'offramp' && paid.length) {
      examples.push(`${t.id} (offramp) ${t.status}${t.failure ? ` ${t.failure.code}` : ''} with ${said}`);
    } else if (t.direction === 'onramp' && paid.length && ['collection_declined', 'collection_timeout'].includes(t.failure?.code)) {
      examples.push(`${t.id} (onramp) ${t.status} ${t.failure.code} with ${said}`);
    }
  }
  return verdict('MTN MoMo transactions agree with MTN\'s verdict (no forged or contradicting callback moved one)', checked, examples);
}

export const INVARIANTS = [payoutsExecutedAtMostOnce, noPurposeSentTwice, noPayoutBeforeDepth, everyPaymentCreditedOnce, everyTransactionEnds, ledgerBalancesAndMatchesChain, momoAgreesWithMtn];
