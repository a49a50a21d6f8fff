// Payment intents played against the kernel's decision (decideIntent), with each payment counted, confirmed or taken
// back as treasury-deposits.ts does: clients collect (sometimes on an older read) and cancel at any moment, payers
// answer prompts with every published STK code and unpublished ones, results arrive late and twice, status checks
// give up on prompts nobody answers, USDC transfers of any size are confirmed or leave the chain, the expiry ticks
// early or while the intent is being paid; a completed intent's payout job runs late and twice, starts or cannot,
// and its transaction ends, reported twice. Never paid (or paid out) twice; nothing credited that nobody paid;
// nothing left processing or waiting at rest, its payout included.
import { decideIntent, type IntentFact, type IntentSnapshot } from '../../shared/kernel/intents.js';
import { stkResult } from '../../shared/kernel/stk-results.js';
import { INTENT_PAYOUT_MACHINE, type PaymentIntentStatus, type PayoutStatus } from '../../shared/domain/machines.js';
import { applyInModel, ModelLedger } from './ledger-model.js';
import type { Dice, Model } from './runner.js';

const SCOPE = { businessId: 'b', environment: 'live' as const };
const PRICE = 100n;
const CODES = ['0', '1', '17', '26', '1001', '1019', '1025', '1032', '1036', '1037', '2001', '9999', '4242'];
const UNDECIDED = { code: 'provider_unavailable', message: 'M-Pesa gave no final answer for the payment prompt.' };
const REORGED = { code: 'reorged', message: 'The block that held this transfer left the canonical chain.' };
const KEY = 'payment_intent:pi';

interface Prompt {
  /** The payer's ResultCode ('0' paid); null while the prompt is on the phone. */
  truth: string | null;
  delivered: boolean;
  givenUp: boolean;
}

interface Deposit {
  amount: bigint;
  method: 'mobile_money' | 'stablecoin';
  state: 'pending' | 'confirmed' | 'failed';
  late: boolean;
}

interface World {
  statuses: Map<string, string>;
  /** payout_status: its own machine on the same row (null: no payout). */
  payout: Map<string, string>;
  /** The payout's transaction, once started: processing until it ends. */
  payoutTx: 'processing' | 'completed' | 'failed' | null;
  payoutStarts: number;
  ledger: ModelLedger;
  attempts: number;
  received: bigint;
  confirmed: bigint;
  beneficiary: boolean;
  /** expires_at has passed. */
  expired: boolean;
  expiryRan: boolean;
  prompts: Prompt[];
  /** Deposits by payment key: a prompt's (`prompt-<n>`) or a transfer's. */
  deposits: Map<string, Deposit>;
  transfers: number;
  completions: number;
  payouts: number;
  /** What a step saw go wrong (checked with the rest). */
  wrong: string[];
}

type Fact =
  | { kind: 'collect'; stale: boolean }
  | { kind: 'cancel' }
  | { kind: 'payer'; prompt: number; code: string }
  | { kind: 'result'; prompt: number }
  | { kind: 'give_up'; prompt: number }
  | { kind: 'transfer'; amount: bigint }
  | { kind: 'chain'; key: string; reorged: boolean }
  | { kind: 'expiry_tick'; early: boolean }
  | { kind: 'payout_job'; starts: boolean }
  | { kind: 'payout_tx_ends'; to: 'completed' | 'failed' };

const status = (w: World) => w.statuses.get(KEY) as PaymentIntentStatus;

function snapshot(w: World): IntentSnapshot {
  return {
    id: 'pi', scope: SCOPE, status: status(w), collectionAttempts: w.attempts, price: PRICE, received: w.received, confirmed: w.confirmed,
    hasBeneficiary: w.beneficiary, payoutStatus: (w.payout.get(KEY) as PayoutStatus | undefined) ?? null, expiresAt: new Date(w.expired ? 0 : 8.64e15), now: new Date(1),
  };
}

/** decideIn(): the loader locks the row, so a plan is never stale. */
function decide(w: World, fact: IntentFact): void {
  const p = decideIntent(snapshot(w), fact);
  const onJob = (job: { name: string }) => {
    if (job.name === 'intent.payout') w.payouts += 1;
  };
  // payout_status is another column of the same row: its moves are checked against their own map.
  const statuses = p.moves[0]?.machine === INTENT_PAYOUT_MACHINE ? w.payout : w.statuses;
  if (applyInModel(p, statuses, w.ledger, onJob) === 'stale') throw new Error('stale plan: the loader locks the row');
  const m = p.moves[0];
  if (m?.set?.payout_status === 'pending') w.payout.set(KEY, 'pending');
  if (m?.set?.payout_transaction_id) {
    w.payoutStarts += 1;
    w.payoutTx = 'processing';
  }
  if (m?.to === 'completed' && statuses === w.statuses) w.completions += 1;
  // Only its current prompt's end lets an intent being processed wait again: an earlier one's is stale.
  if (m && fact.kind === 'prompt_ended' && fact.attempt !== w.attempts) w.wrong.push(`left processing on prompt ${fact.attempt}'s end, prompt ${w.attempts} current`);
  if (m?.set?.collection_attempts !== undefined) {
    w.attempts = Number(m.set.collection_attempts);
    w.prompts.push({ truth: null, delivered: false, givenUp: false });
  }
}

/** recordPayment(): one deposit per payment key; late after the intent stopped waiting, or for a prompt it gave up on. */
function recordPayment(w: World, key: string, method: Deposit['method'], amount: bigint, late: boolean): void {
  if (w.deposits.has(key)) return;
  const s = status(w);
  const isLate = late || !['awaiting_payment', 'processing'].includes(s) || w.received >= PRICE;
  const deposit: Deposit = { amount, method, state: 'pending', late: isLate };
  w.deposits.set(key, deposit);
  if (!isLate) {
    w.received += amount;
    decide(w, { kind: 'payment_counted', method });
  }
  if (method === 'mobile_money') confirm(w, deposit);
}

/** confirmDeposit(): pending -> confirmed; counted toward the intent unless late. */
function confirm(w: World, deposit: Deposit): void {
  deposit.state = 'confirmed';
  if (deposit.late) return;
  w.confirmed += deposit.amount;
  decide(w, { kind: 'payment_confirmed', payout: { name: 'intent.payout', id: 'payout-pi', data: { intentId: 'pi' } } });
}

export const intentsModel: Model<World, Fact> = {
  name: 'payment intents',
  budget: 30,
  init(d: Dice) {
    return {
      statuses: new Map([[KEY, 'awaiting_payment']]), payout: new Map(), payoutTx: null, payoutStarts: 0, ledger: new ModelLedger(), attempts: 0, received: 0n, confirmed: 0n, beneficiary: d.chance(0.5),
      expired: false, expiryRan: false, prompts: [], deposits: new Map(), transfers: 0, completions: 0, payouts: 0, wrong: [],
    };
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    const idx = w.prompts.map((_, i) => i);
    const onPhone = idx.filter((i) => w.prompts[i].truth === null);
    const answered = idx.filter((i) => w.prompts[i].truth !== null);
    const undelivered = answered.filter((i) => !w.prompts[i].delivered);
    const pending = [...w.deposits].filter(([, dep]) => dep.state === 'pending' && dep.method === 'stablecoin').map(([k]) => k);
    // What finishes work, offered while draining too: every prompt answered and its result delivered, every transfer
    // settled on chain, the expiry job run.
    if (onPhone.length) options.push(() => ({ kind: 'payer', prompt: d.pick(onPhone), code: d.pick(CODES) }));
    if (undelivered.length) options.push(() => ({ kind: 'result', prompt: d.pick(undelivered) }));
    if (pending.length) options.push(() => ({ kind: 'chain', key: d.pick(pending), reorged: d.chance(0.3) }));
    if (!w.expiryRan) options.push(() => ({ kind: 'expiry_tick', early: !draining && d.chance(0.3) }));
    // The payout job (and the sweeper's) runs while the payout is pending; its transaction ends once.
    if (w.payout.get(KEY) === 'pending' || (!draining && w.payouts)) options.push(() => ({ kind: 'payout_job', starts: d.chance(0.7) }));
    if (w.payoutTx === 'processing') options.push(() => ({ kind: 'payout_tx_ends', to: d.chance(0.7) ? 'completed' : 'failed' }));
    if (!draining) {
      options.push(() => ({ kind: 'collect', stale: d.chance(0.2) }), () => ({ kind: 'cancel' }));
      if (answered.length) options.push(() => ({ kind: 'result', prompt: d.pick(answered) }));
      const open = idx.filter((i) => !w.prompts[i].givenUp && w.prompts[i].truth === null);
      if (open.length) options.push(() => ({ kind: 'give_up', prompt: d.pick(open) }));
      options.push(() => ({ kind: 'transfer', amount: d.pick([40n, 60n, 100n, 150n]) }));
      if (w.deposits.size) options.push(() => ({ kind: 'chain', key: d.pick([...w.deposits.keys()]), reorged: d.chance(0.5) }));
    }
    return options.length ? d.pick(options)() : null;
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'collect': {
        // The API checks status and expiry under the lock first (409); the decision holds the same rule.
        const attempt = fact.stale ? w.attempts : w.attempts + 1;
        return decide(w, { kind: 'collect', attempt, payer: {}, job: { name: 'intent.collect', id: `collect-${attempt}`, data: { intentId: 'pi', attempt } } });
      }
      case 'cancel':
        return decide(w, { kind: 'cancel' });
      case 'payer':
        w.prompts[fact.prompt].truth = fact.code;
        return;
      case 'result': {
        const prompt = w.prompts[fact.prompt];
        prompt.delivered = true;
        const attempt = fact.prompt + 1;
        const current = status(w) === 'processing' && w.attempts === attempt;
        const verdict = stkResult(prompt.truth!);
        // A success is credited whenever it comes, late when the intent no longer waits on this prompt.
        if (verdict.paid) return recordPayment(w, `prompt-${attempt}`, 'mobile_money', PRICE, !current);
        return decide(w, { kind: 'prompt_ended', attempt, failure: { code: verdict.code, message: verdict.message }, providerReference: `ws_CO_${attempt}` });
      }
      case 'give_up':
        w.prompts[fact.prompt].givenUp = true;
        return decide(w, { kind: 'prompt_ended', attempt: fact.prompt + 1, failure: UNDECIDED, providerReference: null });
      case 'transfer':
        w.transfers += 1;
        return recordPayment(w, `transfer-${w.transfers}`, 'stablecoin', fact.amount, false);
      case 'chain': {
        const deposit = w.deposits.get(fact.key)!;
        if (deposit.state !== 'pending') return;
        if (!fact.reorged) return confirm(w, deposit);
        // failDeposit(): taken back out of what the intent received.
        deposit.state = 'failed';
        if (deposit.late) return;
        w.received -= deposit.amount;
        return decide(w, { kind: 'payment_reversed', failure: REORGED });
      }
      case 'expiry_tick':
        if (!fact.early) {
          w.expired = true;
          w.expiryRan = true;
        }
        return decide(w, { kind: 'expiry_tick' });
      case 'payout_job':
        // startIntentPayout(): only a pending payout is priced and started (checked under the lock, then decided).
        if (w.payout.get(KEY) !== 'pending') return;
        if (!fact.starts) return decide(w, { kind: 'payout_not_started', message: 'The beneficiary was archived before the payout started.' });
        return decide(w, { kind: 'payout_started', transactionId: `tx-${w.payoutStarts + 1}` });
      case 'payout_tx_ends':
        w.payoutTx = fact.to;
        return decide(w, { kind: 'payout_ended', to: fact.to, failure: fact.to === 'failed' ? { code: 'payout_declined', message: 'Declined.' } : null });
    }
  },
  check(w, final) {
    const broken: string[] = [...w.wrong];
    const s = status(w);
    if (w.completions > 1) broken.push('the intent was completed twice');
    if (w.payouts > (w.beneficiary ? 1 : 0)) broken.push(`${w.payouts} payouts staged`);
    if (w.payoutStarts > 1) broken.push(`the payout started ${w.payoutStarts} times`);
    const payout = w.payout.get(KEY);
    if (payout === 'completed' && w.payoutTx !== 'completed') broken.push('payout completed though its transaction did not');
    if (payout && !(s === 'completed' && w.beneficiary)) broken.push(`a payout (${payout}) for an intent ${s}${w.beneficiary ? '' : ' without a beneficiary'}`);
    if (s === 'completed' && w.confirmed < PRICE) broken.push('completed before its payments were confirmed');
    // Paid in full is being processed or done: never waiting, cancelled or expired with the price received.
    if (w.received >= PRICE && !['processing', 'completed'].includes(s)) broken.push(`${s} though its payments cover the price`);
    const counted = [...w.deposits.values()].filter((dep) => !dep.late && dep.state !== 'failed').reduce((sum, dep) => sum + dep.amount, 0n);
    if (counted !== w.received) broken.push(`received ${w.received} but the counted deposits hold ${counted}`);
    for (const key of w.deposits.keys()) {
      const n = /^prompt-(\d+)$/.exec(key);
      if (n && w.prompts[Number(n[1]) - 1]?.truth !== '0') broken.push(`a deposit for prompt ${n[1]}, which nobody paid`);
    }
    if (final) {
      if (!['completed', 'cancelled', 'expired'].includes(s)) broken.push(`${s} at rest after its expiry: no exit`);
      if (s === 'completed' && w.payouts !== (w.beneficiary ? 1 : 0)) broken.push('completed without its beneficiary\'s payout');
      if (payout === 'pending' || payout === 'processing') broken.push(`the payout ${payout} at rest: no exit`);
      if (payout && payout !== (w.payoutTx ?? 'failed')) broken.push(`payout ${payout}, its transaction ${w.payoutTx}`);
      const paid = w.prompts.filter((p) => p.truth === '0').length;
      const credited = [...w.deposits.keys()].filter((k) => k.startsWith('prompt-')).length;
      if (paid !== credited) broken.push(`${paid} prompts paid, ${credited} credited`);
    }
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
  },
};
