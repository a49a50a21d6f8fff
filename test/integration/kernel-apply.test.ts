import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, type TestBusiness } from '../helpers/factories.js';
import { createCustomer } from '../helpers/wallets.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { accountBalance, creditFromFaucet, InsufficientFundsError, type LedgerAccount } from '../../shared/domain/ledger.js';
import type { EventScope } from '../../shared/domain/events.js';
import { apply, StalePlanError } from '../../shared/kernel/apply.js';
import { batchFundingPlan } from '../../shared/kernel/debits.js';
import { decideInflow, type InflowSnapshot } from '../../shared/kernel/chain-records.js';
import { CHAIN_INFLOW_MACHINE, PAYMENT_INTENT_MACHINE } from '../../shared/domain/machines.js';
import { moveRecord, NOW } from '../../shared/domain/transition.js';
import { paymentIntentView } from '../../shared/domain/payment-intents.js';
import { rateSourceFor, storeRate } from '../../shared/domain/rates.js';
import { plan, type Move } from '../../shared/kernel/plan.js';
import { writeHeaders } from '../helpers/factories.js';
import { BASE } from '../helpers/wallets.js';
import { history } from '../helpers/ramps.js';

// apply() carrying out the plans that replaced direct postEntry calls and status UPDATEs, on PostgreSQL: a guarded
// debit refused where it is decided, posted once per reference; a platform record's move a compare-and-set.

const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };

describe('kernel: apply() on the database', () => {
  let api: ApiHarness;
  let scope: EventScope;
  let biz: TestBusiness;
  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
    scope = { businessId: biz.businessId, environment: 'sandbox' };
  });
  after(async () => api.close());

  it('a guarded debit is refused at once when short (nothing written), posted once when covered, and once only', async () => {
    const batchId = randomUUID();
    const debit = () => inUnit(api.deps, (unit) => apply(unit, batchFundingPlan(scope, batchId, 5_000_000n), new Map()));
    const refused = await debit().catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(InsufficientFundsError);
    expect(await accountBalance(api.deps.ds, scope, TREASURY)).to.equal(0n);
    await inUnit(api.deps, async (unit) => {
      await creditFromFaucet(unit.em, scope, TREASURY, 8_000_000n, { description: 'test funding' });
    });
    await debit();
    await debit(); // the same reference: posts nothing more
    expect(await accountBalance(api.deps.ds, scope, TREASURY)).to.equal(3_000_000n);
  });

  it('an inflow credited from a stale snapshot is refused (StalePlanError): the move is a compare-and-set, the entry posted once', async () => {
    const { wallet: { id: walletId, address } } = await createCustomer(api, biz.sandboxKey);
    const hash = `0x${(randomUUID() + randomUUID()).replace(/-/g, '')}`;
    const [{ id }]: { id: string }[] = await api.deps.ds.query(
      `INSERT INTO chain_inflows (environment, chain, address, kind, wallet_id, transaction_hash, log_index, amount, block_number)
       VALUES ('sandbox', 'base', $1, 'managed_wallet', $2, $3, 0, 4000000, 1) RETURNING id::text`, [address.toLowerCase(), walletId, hash],
    );
    const snapshot: InflowSnapshot = {
      id, status: 'pending', environment: 'sandbox', chain: 'base', kind: 'managed_wallet', walletId, businessId: scope.businessId,
      transactionHash: hash, logIndex: 0, amount: 4_000_000n, from: null,
    };
    const wallet: LedgerAccount = { kind: 'wallet', walletId, chain: 'base', asset: 'USDC' };
    const credit = () => inUnit(api.deps, (unit) => apply(unit, decideInflow(snapshot, { kind: 'deep' }), new Map()));
    await credit();
    expect((await api.deps.ds.query(`SELECT status FROM chain_inflows WHERE id = $1`, [id]))[0].status).to.equal('credited');
    expect(await accountBalance(api.deps.ds, scope, wallet)).to.equal(4_000_000n);
    // The same decision again, from the snapshot read before it moved: stale, rolled back whole.
    expect(await credit().catch((err: unknown) => err)).to.be.instanceOf(StalePlanError);
    expect(await accountBalance(api.deps.ds, scope, wallet)).to.equal(4_000_000n);
    // A move the machine has no edge for is never made, whatever the caller read.
    expect(await moveRecord(api.deps.ds.manager, CHAIN_INFLOW_MACHINE, { id, expected: 'credited', to: 'reorged' })).to.equal(null);
    expect((await api.deps.ds.query(`SELECT status FROM chain_inflows WHERE id = $1`, [id]))[0].status).to.equal('credited');
  });

  describe('a row moving along a path in one plan', () => {
    const VIEWS = new Map([[PAYMENT_INTENT_MACHINE, paymentIntentView]]);
    const newIntent = async (): Promise<string> => {
      // Priced from the stored rate, which the pricing pool (not running here) keeps fresh.
      await storeRate(api.deps.ds, 'sandbox', 'KES', await rateSourceFor('sandbox', null).rate('KES'));
      const res = await api.http.post(`${BASE}/payment-intents`).set(writeHeaders(biz.sandboxKey))
        .send({ amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body.id;
    };
    const move = (id: string, from: string, to: string, set?: Record<string, unknown>): Move => ({ machine: PAYMENT_INTENT_MACHINE, id, from, to, ...(set ? { set } : {}) });
    /** Carries the plan out; answers the rows it moved and how many UPDATEs of payment_intents its unit made. */
    const applyCounting = (moves: Move[]) => inUnit(api.deps, async (unit) => {
      // The backend's counts not yet reported include earlier transactions' (PostgreSQL 15): the unit's are the difference.
      const updated = async () => (await unit.em.query(`SELECT n_tup_upd::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'payment_intents'`))[0].n as number;
      const before = await updated();
      const moved = await apply(unit, plan(scope, 'path', { moves }), VIEWS);
      return { moved, updates: (await updated()) - before };
    });
    const eventsOf = async (id: string) => (await api.deps.ds.query(
      `SELECT type, data FROM events WHERE business_id = $1 AND data->>'id' = $2 ORDER BY seq`, [scope.businessId, id],
    )) as { type: string; data: Record<string, any> }[];

    it('is one UPDATE: a history row and an event per step, each event showing the row as its step left it', async () => {
      const id = await newIntent();
      const { moved, updates } = await applyCounting([move(id, 'awaiting_payment', 'processing'), move(id, 'processing', 'completed', { completed_at: NOW })]);
      expect(updates).to.equal(1);
      expect(moved.get(id)).to.include({ status: 'completed' });
      expect(await history(id)).to.deep.equal(['awaiting_payment', 'processing', 'completed']);
      const events = await eventsOf(id);
      expect(events.map((e) => [e.type, e.data.status, e.data.completed_at === null])).to.deep.equal([
        ['payment_intent.awaiting_payment', 'awaiting_payment', true], ['payment_intent.processing', 'processing', true], ['payment_intent.completed', 'completed', false],
      ]);
      expect(events[1]!.data.updated_at).to.equal(events[2]!.data.updated_at);
      // The same path again, from the status read before it moved: stale, and nothing is written.
      expect(await applyCounting([move(id, 'awaiting_payment', 'processing'), move(id, 'processing', 'completed')]).catch((err: unknown) => err)).to.be.instanceOf(StalePlanError);
      expect(await history(id)).to.deep.equal(['awaiting_payment', 'processing', 'completed']);
      expect(await eventsOf(id)).to.have.length(3);
    });

    it('a column two steps set to different values: written step by step, with the same history and events', async () => {
      const id = await newIntent();
      const { moved, updates } = await applyCounting([move(id, 'awaiting_payment', 'processing', { metadata: { step: 1 } }), move(id, 'processing', 'completed', { metadata: { step: 2 }, completed_at: NOW })]);
      expect(updates).to.equal(2);
      expect(moved.get(id)).to.deep.include({ status: 'completed', metadata: { step: 2 } });
      expect(await history(id)).to.deep.equal(['awaiting_payment', 'processing', 'completed']);
      expect((await eventsOf(id)).map((e) => [e.data.status, e.data.metadata?.step])).to.deep.equal([['awaiting_payment', undefined], ['processing', 1], ['completed', 2]]);
    });
  });
});
