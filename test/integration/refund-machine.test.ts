import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness } from '../helpers/factories.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { kesBeneficiary, offramp, quote, verifiedWallet } from '../helpers/ramps.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { REFUND_MACHINE, type RefundStatus } from '../../shared/domain/machines.js';
import { moveRecord } from '../../shared/domain/transition.js';
import { loadTransaction, transactionView } from '../../shared/domain/transactions.js';
import { moveTx } from '../helpers/moves.js';
import { apply, StalePlanError } from '../../shared/kernel/apply.js';
import { KernelInvariantError } from '../../shared/kernel/invariants.js';
import { plan } from '../../shared/kernel/plan.js';
import { refundMove, type RefundState } from '../../shared/kernel/refund-machine.js';

// A transaction's refund moves only along REFUND_MACHINE, on PostgreSQL: each write a compare-and-set from the status
// read (refund_status), the data beside it (refund) never holding a status, the two null together.

describe('a refund\'s status moves only along its machine (transactions.refund_status)', () => {
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let scope: { businessId: string; environment: 'sandbox' };
  let beneficiary: string;
  before(async () => {
    api = await startApi();
    const biz = await makeBusiness();
    key = biz.sandboxKey;
    scope = { businessId: biz.businessId, environment: 'sandbox' };
    pools = await startPools(['pricing']);
    beneficiary = await kesBeneficiary(api, key);
  });
  after(async () => {
    await pools?.close();
    await api.close();
  });

  /** An off-ramp (left in `created`: no settlement pool runs here) whose refund the test writes. */
  async function offrampId(): Promise<string> {
    const wallet = await verifiedWallet(api, key);
    const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
    const res = await offramp(api, key, q.id, wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  }
  const refund = (status: RefundStatus, amount = '7.000000'): RefundState => ({ status, amount, to_address: '0x000000000000000000000000000000000000dEaD', transaction_hash: null, sends: [] });
  /** The refund decided from the status `read`, carried out by apply(). */
  const record = (id: string, read: RefundStatus | null, next: RefundState) =>
    inUnit(api.deps, (unit) => apply(unit, plan(scope, 'test', { moves: [refundMove({ id, refund_status: read }, next)!] }), new Map()));
  const stored = async (id: string) => (await api.deps.ds.query(`SELECT refund_status, refund FROM transactions WHERE id = $1`, [id]))[0];

  it('created, moved and shown from the column: the view is what it was when the JSON held the status', async () => {
    const id = await offrampId();
    await record(id, null, refund('pending'));
    await record(id, 'pending', refund('failed', '0.000000'));
    expect(await stored(id)).to.deep.equal({ refund_status: 'failed', refund: { amount: '0.000000', to_address: '0x000000000000000000000000000000000000dEaD', transaction_hash: null, sends: [] } });
    const view = transactionView((await loadTransaction(api.deps.ds, id))!);
    expect(JSON.stringify(view.refund)).to.equal('{"status":"failed","amount":"0.000000","to_address":"0x000000000000000000000000000000000000dEaD","transaction_hash":null}');
  });

  it('a completed refund never becomes failed: refused before anything is written, and by the compare-and-set', async () => {
    const id = await offrampId();
    await record(id, null, refund('completed'));
    const refused = await record(id, 'completed', refund('failed')).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(KernelInvariantError);
    expect(await moveRecord(api.deps.ds.manager, REFUND_MACHINE, { id, to: 'failed', expected: 'completed' })).to.equal(null);
    expect((await stored(id)).refund_status).to.equal('completed');
  });

  it('a failed refund is retried to pending once, not twice at the same time: the second finds it moved (StalePlanError)', async () => {
    const id = await offrampId();
    await record(id, null, refund('pending'));
    await record(id, 'pending', refund('failed'));
    const results = await Promise.allSettled([record(id, 'failed', refund('pending', '7.000000')), record(id, 'failed', refund('pending', '7.000000'))]);
    expect(results.map((r) => r.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
    expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).to.be.instanceOf(StalePlanError);
    expect((await stored(id)).refund_status).to.equal('pending');
    // A stale decision that read it failed is refused the same way once it has moved on.
    expect(await record(id, 'failed', refund('pending')).catch((err: unknown) => err)).to.be.instanceOf(StalePlanError);
  });

  it('a transaction\'s move sets neither the refund nor its status: only the refund\'s own compare-and-set does', async () => {
    const id = await offrampId();
    const tx = (await loadTransaction(api.deps.ds, id))!;
    for (const set of [{ refund_status: 'pending' }, { refund: refund('pending') }]) {
      const refused = await inUnit(api.deps, (unit) => moveTx(unit, tx, 'failed', { set })).catch((err: Error) => err.message);
      expect(refused, Object.keys(set)[0]).to.match(/written by its own machine/);
    }
    expect(await stored(id)).to.deep.equal({ refund_status: null, refund: null });
  });

  it('the table refuses a refund without its status, a status without a refund, and a status inside the JSON', async () => {
    const id = await offrampId();
    const refusal = (sql: string) => api.deps.ds.query(sql, [id]).then(() => null, (err: { constraint?: string }) => err.constraint);
    expect(await refusal(`UPDATE transactions SET refund = '{"amount": "1"}' WHERE id = $1`)).to.equal('transactions_refund_status_present');
    expect(await refusal(`UPDATE transactions SET refund_status = 'pending' WHERE id = $1`)).to.equal('transactions_refund_status_present');
    expect(await refusal(`UPDATE transactions SET refund = '{"status": "pending", "amount": "1"}', refund_status = 'pending' WHERE id = $1`)).to.equal('transactions_refund_status_typed');
    expect(await refusal(`UPDATE transactions SET refund = '{"amount": "1"}', refund_status = 'refunded' WHERE id = $1`)).to.match(/refund_status/);
  });
});
