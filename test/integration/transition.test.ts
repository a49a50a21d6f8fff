import { expect } from 'chai';
import { getConfig } from '../../shared/config.js';
import { sealedPayerColumns } from '../../shared/domain/payer-data.js';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness } from '../helpers/factories.js';
import { externalWallet } from '../helpers/wallets.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { NOW, transition } from '../../shared/domain/transition.js';
import { EVENT_TYPES, sourcesOf, TRANSACTION_MACHINE, WALLET_OWNERSHIP_MACHINE } from '../../shared/domain/machines.js';
import { jobId } from '../../shared/queues/registry.js';
import { asJobFailure } from '../../workers/runtime.js';
import { AppError, PermanentJobError } from '../../shared/errors.js';
import { InsufficientFundsError } from '../../shared/domain/ledger.js';
import type { Environment } from '../../shared/domain/chains.js';
import { loadTransaction, scopeOf, transactionView, type TransactionRow } from '../../shared/domain/transactions.js';
import { moveTx } from '../helpers/moves.js';
import { apply, StalePlanError } from '../../shared/kernel/apply.js';
import { plan } from '../../shared/kernel/plan.js';
import { TRANSACTION_VIEWS } from '../../shared/domain/transaction-moves.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { kesBeneficiary, offramp, quote, verifiedWallet } from '../helpers/ramps.js';

describe('the engine: units of work and the one transition function', () => {
  let api: ApiHarness;
  let key: string;
  let scope: { businessId: string; environment: Environment };
  before(async () => {
    api = await startApi();
    const biz = await makeBusiness();
    key = biz.sandboxKey;
    scope = { businessId: biz.businessId, environment: 'sandbox' };
  });
  after(() => api.close());

  const verify = (walletId: string, jobs: { name: 'outbox.cleanup'; id: string; data: { olderThanHours: number } }[] = []) =>
    inUnit(api.deps, (unit) =>
      transition(unit, WALLET_OWNERSHIP_MACHINE, {
        scope,
        id: walletId,
        to: 'verified',
        expected: 'unverified',
        set: { verified_at: NOW },
        reason: 'test',
        view: (row: Record<string, any>) => ({ id: row.id }),
        jobs: () => jobs,
      }),
    );

  it('moves from an allowed status once, with one history row and one event; the repeat is a no-op', async () => {
    const { wallet } = await externalWallet(api, key);
    const moved = await verify(wallet.id);
    expect(moved?.from).to.equal('unverified');
    expect(moved?.row.ownership_status).to.equal('verified');
    expect(await verify(wallet.id)).to.equal(null);
    const history = await api.deps.ds.query(`SELECT from_status, to_status, reason FROM status_history WHERE resource_id = $1`, [wallet.id]);
    expect(history).to.deep.equal([{ from_status: 'unverified', to_status: 'verified', reason: 'test' }]);
    const events = await api.deps.ds.query(`SELECT type, data FROM events WHERE business_id = $1 AND data->>'id' = $2`, [scope.businessId, wallet.id]);
    expect(events).to.deep.equal([{ type: 'wallet.verified', data: { id: wallet.id } }]);
  });

  it('of 12 concurrent attempts at the same move, exactly one wins', async () => {
    const { wallet } = await externalWallet(api, key);
    const results = await Promise.all(Array.from({ length: 12 }, () => verify(wallet.id)));
    expect(results.filter(Boolean)).to.have.length(1);
    const [{ n }] = await api.deps.ds.query(`SELECT count(*)::int AS n FROM status_history WHERE resource_id = $1`, [wallet.id]);
    expect(n).to.equal(1);
  });

  it('moves only from the status the caller read: a row no longer there is left alone', async () => {
    const { wallet } = await externalWallet(api, key);
    const stale = await inUnit(api.deps, (unit) =>
      transition(unit, WALLET_OWNERSHIP_MACHINE, { scope, id: wallet.id, to: 'verified', expected: 'managed', view: () => ({}) }),
    );
    expect(stale).to.equal(null);
    expect((await api.deps.ds.query(`SELECT ownership_status FROM wallets WHERE id = $1`, [wallet.id]))[0].ownership_status).to.equal('unverified');
  });

  it('moves only while the columns its caller read are unchanged, and writes its companion record either way', async () => {
    const { wallet } = await externalWallet(api, key);
    const note = async (label: string, chain: string) => {
      const [{ n }] = await api.deps.ds.query(`SELECT count(*)::int AS n FROM status_history WHERE resource_id = $1`, [wallet.id]);
      const moved = await inUnit(api.deps, (unit) =>
        transition(unit, WALLET_OWNERSHIP_MACHINE, {
          scope, id: wallet.id, to: 'verified', expected: 'unverified', set: { verified_at: NOW }, reason: 'test', view: (row: Record<string, any>) => ({ id: row.id }),
          unchanged: { chain },
          // A record of the attempt, written in the same statement as the move (a status history row stands in here).
          alongside: {
            insert: (first) => `INSERT INTO status_history (business_id, environment, resource_type, resource_id, from_status, to_status, reason) VALUES ($${first}, $${first + 1}, 'note', $${first + 2}, NULL, 'noted', $${first + 3})`,
            params: [scope.businessId, scope.environment, wallet.id, label],
          },
        }),
      );
      const [{ n: after }] = await api.deps.ds.query(`SELECT count(*)::int AS n FROM status_history WHERE resource_id = $1`, [wallet.id]);
      return { moved, written: after - n };
    };
    // Read as another chain: not moved, the companion written.
    const stale = await note('stale', 'ethereum'); // registered on base
    expect(stale.moved).to.equal(null);
    expect(stale.written).to.equal(1);
    const fresh = await note('fresh', 'base');
    expect(fresh.moved?.row.ownership_status).to.equal('verified');
    expect(fresh.written).to.equal(2); // the move's history row and the companion
    const notes = await api.deps.ds.query(`SELECT reason FROM status_history WHERE resource_id = $1 AND resource_type = 'note' ORDER BY id`, [wallet.id]);
    expect(notes.map((r: { reason: string }) => r.reason)).to.deep.equal(['stale', 'fresh']);
  });
  it('never touches a row of another business or environment', async () => {
    const { wallet } = await externalWallet(api, key);
    const other = await inUnit(api.deps, (unit) =>
      transition(unit, WALLET_OWNERSHIP_MACHINE, { scope: { ...scope, environment: 'live' }, id: wallet.id, to: 'verified', expected: 'unverified', view: () => ({}) }),
    );
    expect(other).to.equal(null);
    expect((await api.deps.ds.query(`SELECT ownership_status FROM wallets WHERE id = $1`, [wallet.id]))[0].ownership_status).to.equal('unverified');
  });

  it('stages its jobs in the outbox and enqueues them after the commit', async () => {
    const { wallet } = await externalWallet(api, key);
    const id = jobId('outbox.cleanup', randomUUID());
    await verify(wallet.id, [{ name: 'outbox.cleanup', id, data: { olderThanHours: 9999 } }]);
    expect(await api.deps.queues.webhooks.getJob(id)).to.not.equal(undefined);
    const [row] = await api.deps.ds.query(`SELECT dispatched_at FROM outbox_jobs WHERE job_id = $1`, [id]);
    expect(row).to.not.equal(undefined);
    await api.deps.queues.webhooks.remove(id);
  });

  it('a unit that fails leaves nothing: no status, no history, no event, no job', async () => {
    const { wallet } = await externalWallet(api, key);
    const id = jobId('outbox.cleanup', randomUUID());
    const failing = inUnit(api.deps, async (unit) => {
      await transition(unit, WALLET_OWNERSHIP_MACHINE, {
        scope, id: wallet.id, to: 'verified', expected: 'unverified', set: { verified_at: NOW }, view: () => ({}), jobs: () => [{ name: 'outbox.cleanup', id, data: { olderThanHours: 1 } }],
      });
      throw new Error('boom');
    });
    await failing.then(() => expect.fail('should throw'), (err: Error) => expect(err.message).to.equal('boom'));
    expect((await api.deps.ds.query(`SELECT ownership_status FROM wallets WHERE id = $1`, [wallet.id]))[0].ownership_status).to.equal('unverified');
    expect(await api.deps.ds.query(`SELECT 1 FROM status_history WHERE resource_id = $1`, [wallet.id])).to.have.length(0);
    expect(await api.deps.ds.query(`SELECT 1 FROM outbox_jobs WHERE job_id = $1`, [id])).to.have.length(0);
    expect(await api.deps.queues.webhooks.getJob(id)).to.equal(undefined);
  });

  it('a unit chosen as a deadlock\'s victim runs again from the start, and both units commit', async () => {
    const [a, b] = [(await externalWallet(api, key)).wallet.id, (await externalWallet(api, key)).wallet.id];
    const runs = { first: 0, second: 0 };
    let bothHoldOne!: () => void;
    const ready = new Promise<void>((resolve) => (bothHoldOne = resolve));
    let holding = 0;
    // Each locks one wallet, waits until the other holds its own, then asks for the other's: PostgreSQL kills one.
    const crossing = (name: 'first' | 'second', mine: string, theirs: string) =>
      inUnit(api.deps, async (unit) => {
        runs[name] += 1;
        await unit.em.query(`UPDATE wallets SET label = $2 WHERE id = $1`, [mine, name]);
        if (runs[name] === 1 && ++holding === 2) bothHoldOne();
        if (runs[name] === 1) await ready;
        await unit.em.query(`UPDATE wallets SET label = $2 WHERE id = $1`, [theirs, name]);
        return name;
      });
    expect(await Promise.all([crossing('first', a, b), crossing('second', b, a)])).to.deep.equal(['first', 'second']);
    expect(runs.first + runs.second, `the victim ran twice (runs: ${JSON.stringify(runs)})`).to.equal(3);
    const labels = (await api.deps.ds.query(`SELECT label FROM wallets WHERE id = ANY($1)`, [[a, b]])).map((r: { label: string }) => r.label);
    // The unit that committed last wrote both rows.
    expect(new Set(labels).size).to.equal(1);
  });

  it('archiving a wallet or a beneficiary goes through it too: one history row, and a repeat changes nothing', async () => {
    const { wallet } = await externalWallet(api, key);
    const ben = await api.http.post('/api/v1/business/beneficiaries').set({ Authorization: `Bearer ${key}`, 'Idempotency-Key': randomUUID() }).send({
      currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'A', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
    });
    for (const path of [`wallets/${wallet.id}`, `beneficiaries/${ben.body.id}`]) {
      for (let i = 0; i < 2; i++) {
        const res = await api.http.delete(`/api/v1/business/${path}`).set({ Authorization: `Bearer ${key}`, 'Idempotency-Key': randomUUID() });
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        expect(res.body.status).to.equal('archived');
      }
    }
    const history = await api.deps.ds.query(`SELECT resource_type, from_status, to_status FROM status_history WHERE resource_id = ANY($1) ORDER BY id`, [[wallet.id, ben.body.id]]);
    expect(history).to.deep.equal([
      { resource_type: 'wallet', from_status: 'active', to_status: 'archived' },
      { resource_type: 'beneficiary', from_status: 'active', to_status: 'archived' },
    ]);
  });

  it('machines are data: sources of a status, terminal statuses, one event type per announced status', () => {
    expect(sourcesOf(TRANSACTION_MACHINE, 'completed')).to.deep.equal(['processing']);
    expect(sourcesOf(TRANSACTION_MACHINE, 'created')).to.have.members(['awaiting_funds', 'action_required']);
    expect(TRANSACTION_MACHINE.moves.completed).to.equal(undefined);
    // Only a late deposit reopens it, or a corroborated late success of an on-ramp's timed-out collection.
    expect(TRANSACTION_MACHINE.moves.failed).to.deep.equal(['action_required', 'funded']);
    expect(EVENT_TYPES).to.include.members(['transaction.completed', 'settlement.confirmed', 'quote.available', 'wallet.verified']);
    expect(EVENT_TYPES).to.not.include('quote.pending');
  });

  it('workers give up on business refusals and retry outages and the unknown', () => {
    expect(asJobFailure(new AppError('quote_expired', 'x'))).to.be.instanceOf(PermanentJobError);
    expect(asJobFailure(new InsufficientFundsError({ kind: 'treasury', asset: 'USDC' }, 0n, 1n))).to.be.instanceOf(PermanentJobError);
    const outage = AppError.unavailable('down');
    expect(asJobFailure(outage)).to.equal(outage);
    const unknown = new Error('ECONNRESET');
    expect(asJobFailure(unknown)).to.equal(unknown);
  });

  describe('a transaction moves only from the status its caller saw, and only where its machine allows', () => {
    let pools: RunningPools;
    let beneficiary: string;
    before(async () => {
      pools = await startPools(['pricing']);
      beneficiary = await kesBeneficiary(api, key);
    });
    after(() => pools?.close());

    /** An external-wallet off-ramp left in `created` (no settlement pool runs here), then set as the case needs. */
    async function offrampIn(status: string, set: Record<string, unknown> = {}): Promise<TransactionRow> {
      const wallet = await verifiedWallet(api, key);
      const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
      const res = await offramp(api, key, q.id, wallet.id);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const columns = Object.keys(set);
      await api.deps.ds.query(
        `UPDATE transactions SET status = $2${columns.map((c, i) => `, ${c} = $${i + 3}`).join('')} WHERE id = $1`,
        [res.body.id, status, ...columns.map((c) => (set[c] !== null && typeof set[c] === 'object' ? JSON.stringify(set[c]) : set[c]))],
      );
      return (await loadTransaction(api.deps.ds, res.body.id))!;
    }
    const failure = { code: 'test', message: 'Set by the test.' };
    const statusOf = async (id: string) => (await loadTransaction(api.deps.ds, id))!.status;

    it('a job acting on a row it read before a newer decision changes nothing (compare-and-set)', async () => {
      const seen = await offrampIn('processing');
      // A newer decision: the payout is stalled for the business.
      const newer = await inUnit(api.deps, (unit) => moveTx(unit, seen, 'action_required', { set: { stalled_at: 'funded', failure }, reason: 'test' }));
      expect(newer?.from).to.equal('processing');
      // The stale job still holds `processing` and tries to fail it: processing -> failed is allowed, but it is not there any more.
      const stale = await inUnit(api.deps, (unit) => moveTx(unit, seen, 'failed', { set: { failure }, reason: 'stale' }));
      expect(stale).to.equal(null);
      expect(await statusOf(seen.id)).to.equal('action_required');
      const reasons = await api.deps.ds.query(`SELECT reason FROM status_history WHERE resource_id = $1 AND reason IN ('test', 'stale')`, [seen.id]);
      expect(reasons).to.deep.equal([{ reason: 'test' }]);
    });

    it('action_required goes back only to the step it stalled in (or on to failed)', async () => {
      const tx = await offrampIn('action_required', { stalled_at: 'funded', failure });
      expect(await inUnit(api.deps, (unit) => moveTx(unit, tx, 'processing'))).to.equal(null);
      expect(await statusOf(tx.id)).to.equal('action_required');
      expect((await inUnit(api.deps, (unit) => moveTx(unit, tx, 'funded')))?.from).to.equal('action_required');
    });

    it('a failed transaction is reopened only by a late deposit, never to be retried', async () => {
      const refunded = await offrampIn('failed', { failure, refund: { amount: '10.150000', transaction_hash: null }, refund_status: 'completed' });
      // A stale provider check that still believes the payout is out: refused.
      expect(await inUnit(api.deps, (unit) => moveTx(unit, refunded, 'action_required', { set: { stalled_at: 'funded' }, reason: 'provider_unavailable' }))).to.equal(null);
      expect(await statusOf(refunded.id)).to.equal('failed');
      // USDC that arrived after it failed is left to the business (refunded, never paid out).
      const late = await inUnit(api.deps, (unit) => moveTx(unit, refunded, 'action_required', { set: { stalled_at: 'created' }, reason: 'late_deposit' }));
      expect(late?.from).to.equal('failed');
    });

    it('failed -> funded only for an on-ramp whose prompt ended unpaid (CONTRACT §18) and nothing was returned', async () => {
      const timeout = { code: 'collection_timeout', message: 'Set by the test.' };
      const tx = await offrampIn('failed', { failure: timeout });
      // As an on-ramp (the columns an on-ramp has), failed with `failure` and `refund`.
      const as = async (set: Record<string, unknown>) => {
        const phone = sealedPayerColumns(getConfig(), 'transactions', 'payer_phone', tx, '+254700000000');
        await api.deps.ds.query(`UPDATE transactions SET direction = 'onramp', payer_phone_redacted = '+254*****0000', ${Object.keys(phone).map((c, i) => `${c} = $${i + 4}`).join(', ')},
          beneficiary_id = NULL, funding_type = NULL, failure = $2, refund = $3::jsonb - 'status', refund_status = $3::jsonb->>'status' WHERE id = $1`, [tx.id, JSON.stringify(set.failure), set.refund ? JSON.stringify(set.refund) : null, ...Object.values(phone)]);
        return (await loadTransaction(api.deps.ds, tx.id))!;
      };
      // The guard as the transition's conditional UPDATE checks it (an off-ramp's amounts make no on-ramp view).
      const guard = TRANSACTION_MACHINE.guards!.failed!('funded', 't', undefined);
      const fundable = async (row: TransactionRow) => (await api.deps.ds.query(`SELECT 1 FROM transactions t WHERE t.id = $1 AND ${guard}`, [row.id])).length === 1;
      expect((await inUnit(api.deps, (unit) => moveTx(unit, tx, 'funded')))).to.equal(null); // an off-ramp
      for (const code of ['collection_declined', 'payer_insufficient_funds', 'collection_failed']) expect(await fundable(await as({ failure: { ...timeout, code } })), code).to.equal(true);
      expect(await fundable(await as({ failure: { ...timeout, code: 'provider_unavailable' } }))).to.equal(false);
      expect(await fundable(await as({ failure: timeout, refund: { status: 'pending', amount: '1', transaction_hash: null } }))).to.equal(false);
      expect(await fundable(await as({ failure: timeout }))).to.equal(true);
    });

    it('apply() moves transactions only with what follows their moves (TRANSACTION_VIEWS): rows making the same move together, all or none', async () => {
      const [a, b] = [await offrampIn('funded'), await offrampIn('funded')];
      const take = (ids: string[]) => plan(scopeOf(a), 'taken', { moves: ids.map((id) => ({ machine: TRANSACTION_MACHINE, id, from: 'funded', to: 'processing', reason: 'test' })) });
      // A bare view would skip what follows a transaction's move (a treasury payout's intent or batch): refused, nothing written.
      const bare = await inUnit(api.deps, (unit) => apply(unit, take([a.id]), new Map([[TRANSACTION_MACHINE, (row: TransactionRow) => transactionView(row)]]))).catch((err: Error) => err.message);
      expect(bare).to.match(/what follows its move/);
      expect(await statusOf(a.id)).to.equal('funded');
      const moved = await inUnit(api.deps, (unit) => apply(unit, take([a.id, b.id]), TRANSACTION_VIEWS));
      expect([...moved.keys()]).to.deep.equal([a.id, b.id]);
      expect([await statusOf(a.id), await statusOf(b.id)]).to.deep.equal(['processing', 'processing']);
      const reasons = await api.deps.ds.query(`SELECT resource_id, from_status, to_status FROM status_history WHERE reason = 'test' AND resource_id = ANY($1::uuid[]) ORDER BY resource_id`, [[a.id, b.id]]);
      expect(reasons).to.have.length(2);
      // One of them no longer where the plan read it: the whole plan is stale and the other does not move either.
      const c = await offrampIn('funded');
      const stale = await inUnit(api.deps, (unit) => apply(unit, take([c.id, a.id]), TRANSACTION_VIEWS)).catch((err: unknown) => err);
      expect(stale).to.be.instanceOf(StalePlanError);
      expect(await statusOf(c.id)).to.equal('funded');
    });
  });
});
