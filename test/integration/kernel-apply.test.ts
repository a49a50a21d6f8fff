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
import { CHAIN_INFLOW_MACHINE } from '../../shared/domain/machines.js';
import { moveRecord } from '../../shared/domain/transition.js';

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
});
