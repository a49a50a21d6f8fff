// Treasury withdrawals played against the kernel's decision (decideWithdrawal, withdrawalEntry): clients create and
// archive, jobs run late, twice or after the row moved, the hot wallet's sends are mined or revert and their receipts
// arrive in any order, any number of times. Live and sandbox worlds alike.
import { decideWithdrawal, withdrawalEntry, type WithdrawalFact, type WithdrawalSnapshot } from '../../shared/kernel/withdrawals.js';
import type { TreasuryWithdrawalStatus } from '../../shared/domain/machines.js';
import { applyInModel, InsufficientInModel, ModelLedger } from './ledger-model.js';
import type { Dice, Model } from './runner.js';

const SCOPE = { businessId: 'b', environment: 'live' as const };
const FUNDED = 1_000_000n;

interface Send {
  id: string;
  state: 'staged' | 'mined' | 'reverted';
}

interface World {
  live: boolean;
  ledger: ModelLedger;
  statuses: Map<string, string>;
  withdrawals: Map<string, { amount: bigint; hash: string | null; walletActive: boolean }>;
  /** The hot wallet's sends, one per withdrawal (chain_sends is unique per reference). */
  sends: Map<string, Send>;
  /** On-chain USDC: the hot wallet and the business's external wallet. */
  hot: bigint;
  external: bigint;
  /** Jobs waiting in the queue (a withdrawal.send per id), possibly several copies. */
  queue: string[];
  created: number;
}

type Fact =
  | { kind: 'create'; amount: bigint }
  | { kind: 'archive_wallet'; id: string }
  | { kind: 'send_job'; id: string }
  | { kind: 'sweeper' }
  | { kind: 'chain_settles'; id: string; reverts: boolean }
  | { kind: 'receipt'; id: string };

const status = (w: World, id: string) => w.statuses.get(`treasury_withdrawal:${id}`) as TreasuryWithdrawalStatus;

function snapshot(w: World, id: string): WithdrawalSnapshot {
  const row = w.withdrawals.get(id)!;
  return { id, scope: SCOPE, status: status(w, id), walletId: 'wallet', chain: 'base', amount: row.amount, transactionHash: row.hash, sendStaged: w.sends.has(id) };
}

/** decide + apply in one unit, as decideIn() does; a hash is set with the move (the transition's `set`). */
function decide(w: World, id: string, fact: WithdrawalFact): void {
  const p = decideWithdrawal(snapshot(w, id), fact);
  if (applyInModel(p, w.statuses, w.ledger, () => undefined) === 'stale') throw new Error(`stale plan for ${id}: the loader locks the row`);
  const move = p.moves[0];
  if (move?.set?.transaction_hash) w.withdrawals.get(id)!.hash = String(move.set.transaction_hash);
}

export const withdrawalsModel: Model<World, Fact> = {
  name: 'treasury withdrawals',
  budget: 40,
  init(d: Dice) {
    const ledger = new ModelLedger();
    ledger.balances.set('treasury:USDC', FUNDED);
    return { live: d.chance(0.5), ledger, statuses: new Map(), withdrawals: new Map(), sends: new Map(), hot: FUNDED, external: 0n, queue: [], created: 0 };
  },
  next(w, d, draining) {
    const ids = [...w.withdrawals.keys()];
    const options: (() => Fact | null)[] = [];
    if (!draining && w.created < 6) options.push(() => ({ kind: 'create', amount: BigInt(1 + d.int(400_000)) }));
    if (!draining && ids.length) options.push(() => ({ kind: 'archive_wallet', id: d.pick(ids) }));
    if (w.queue.length) options.push(() => ({ kind: 'send_job', id: w.queue.splice(d.int(w.queue.length), 1)[0] }));
    const staged = [...w.sends].filter(([, s]) => s.state === 'staged');
    if (staged.length) options.push(() => ({ kind: 'chain_settles', id: d.pick(staged)[0], reverts: d.chance(0.2) }));
    const settled = [...w.sends].filter(([id, s]) => s.state !== 'staged' && status(w, id) === 'pending');
    if (settled.length) options.push(() => ({ kind: 'receipt', id: d.pick(settled)[0] }));
    // Duplicates and stale facts: a receipt again, a send job for a row that moved on.
    const anySettled = [...w.sends].filter(([, s]) => s.state !== 'staged');
    if (!draining && anySettled.length) options.push(() => ({ kind: 'receipt', id: d.pick(anySettled)[0] }));
    if (!draining && ids.length) options.push(() => ({ kind: 'send_job', id: d.pick(ids) }));
    if (ids.some((id) => status(w, id) === 'pending' && !w.queue.includes(id) && !w.sends.has(id))) options.push(() => ({ kind: 'sweeper' }));
    if (!options.length) return null;
    return d.pick(options)();
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'create': {
        const id = `w${++w.created}`;
        try {
          w.ledger.post(withdrawalEntry({ id, walletId: 'wallet', chain: 'base', amount: fact.amount }, 'pending'));
        } catch (err) {
          if (err instanceof InsufficientInModel) return; // 409 insufficient_funds: nothing written
          throw err;
        }
        w.withdrawals.set(id, { amount: fact.amount, hash: null, walletActive: true });
        w.statuses.set(`treasury_withdrawal:${id}`, 'pending');
        w.queue.push(id);
        return;
      }
      case 'archive_wallet':
        w.withdrawals.get(fact.id)!.walletActive = false;
        return;
      case 'sweeper':
        for (const [id] of w.withdrawals) if (status(w, id) === 'pending' && !w.queue.includes(id) && !w.sends.has(id)) w.queue.push(id);
        return;
      case 'send_job': {
        // sendWithdrawal: the row locked; not pending, nothing; archived, failed; else the chain sends.
        if (status(w, fact.id) !== 'pending') return;
        if (!w.withdrawals.get(fact.id)!.walletActive) return decide(w, fact.id, { kind: 'wallet_archived' });
        if (!w.live) {
          w.hot -= w.withdrawals.get(fact.id)!.amount;
          w.external += w.withdrawals.get(fact.id)!.amount;
          return decide(w, fact.id, { kind: 'sent', hash: `0xsim-${fact.id}` });
        }
        if (!w.sends.has(fact.id)) w.sends.set(fact.id, { id: fact.id, state: 'staged' });
        return;
      }
      case 'chain_settles': {
        const send = w.sends.get(fact.id)!;
        if (send.state !== 'staged') return;
        send.state = fact.reverts ? 'reverted' : 'mined';
        if (!fact.reverts) {
          w.hot -= w.withdrawals.get(fact.id)!.amount;
          w.external += w.withdrawals.get(fact.id)!.amount;
        }
        return;
      }
      case 'receipt': {
        const send = w.sends.get(fact.id)!;
        return decide(w, fact.id, send.state === 'mined' ? { kind: 'sent', hash: `0xmined-${fact.id}` } : { kind: 'reverted', message: 'execution reverted' });
      }
    }
  },
  check(w, final) {
    const broken: string[] = [];
    const treasury = w.ledger.balance('treasury:USDC');
    const clearing = w.ledger.balance('settlement_clearing:USDC');
    const paid = w.ledger.balance('wallet:wallet:base:USDC');
    if (treasury < 0n) broken.push(`treasury below zero: ${treasury}`);
    if (treasury + clearing + paid !== FUNDED) broken.push('ledger does not conserve the treasury\'s USDC');
    for (const [id, row] of w.withdrawals) {
      const s = status(w, id);
      const mined = w.sends.get(id)?.state === 'mined' || (!w.live && s === 'completed');
      if (s === 'failed' && mined) broken.push(`${id} failed back into the treasury after its send was mined: paid twice`);
      if (final && s === 'pending') broken.push(`${id} still pending at quiescence: no exit`);
      if (s === 'completed' && !row.hash) broken.push(`${id} completed without a hash`);
    }
    if (w.external !== w.ledger.balance('wallet:wallet:base:USDC') + (final ? 0n : [...w.withdrawals].filter(([id]) => w.sends.get(id)?.state === 'mined' && status(w, id) === 'pending').reduce((s, [, r]) => s + r.amount, 0n))) {
      broken.push('the wallet\'s on-chain USDC differs from what the ledger paid it');
    }
    if (final && w.hot !== treasury + clearing) broken.push(`hot wallet ${w.hot} != ledger ${treasury + clearing}`);
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  },
};
