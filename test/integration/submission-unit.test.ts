import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness } from '../helpers/factories.js';
import { createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, history, kesBeneficiary, offramp, quote } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { statementsOf } from '../helpers/statements.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { submitOfframp } from '../../shared/domain/offramps.js';
import { setConfirmations, settlementOf } from '../../shared/domain/settlements.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { sendPayoutJob } from '../../workers/providers/send-payout.job.js';

// The sandbox submission of a managed wallet's off-ramp is one unit of work; what it reads comes with the statements
// that lock or write (issue 39): the wallet with the off-ramp and its settlement, the transfers with the statement
// that records the new one. No settlement pool runs here: the test runs the submission itself.
describe('the sandbox submission unit', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing']);
    key = (await makeBusiness()).sandboxKey;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  it('reads its off-ramp, settlement and wallet in one statement, and its transfers with the one it records', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '50');
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, key) });
    const created = await offramp(api, key, q.id, customer.wallet.id);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const ds = await getDs();
    // A sandbox chain whose blocks come a minute apart: the transfer shows one confirmation however slow the machine
    // (at the tests' 5 ms a step, 55 ms between the transfer and its count made it funded at once on a loaded CI).
    const slowChain = () => chainFor('sandbox', { ...pools.deps.config, sandboxStepMs: 60_000 });
    const { result, statements } = await statementsOf(ds, () => submitOfframp(pools.deps, slowChain, created.body.id));
    expect(result).to.equal('submitted');
    expect(await history(created.body.id)).to.deep.equal(['created', 'signing', 'submitting', 'awaiting_funds']);
    const settlement = (await settlementOf(ds, created.body.id))!;
    expect(settlement).to.deep.include({ status: 'confirming', confirmations: 1, received_amount: settlement.total_required });
    expect((await ds.query(`SELECT count(*)::int AS n FROM settlement_transfers WHERE settlement_id = $1`, [settlement.id]))[0].n).to.equal(1);
    // The first statement reads and locks all three; no other reads the wallet or the transfers.
    expect(statements[0]).to.match(/FROM settlements s JOIN transactions t .* LEFT JOIN wallets w ON w\.id = t\.wallet_id/);
    expect(statements.filter((s) => /FROM wallets w LEFT JOIN customers/.test(s))).to.deep.equal([]);
    expect(statements.filter((s) => /^SELECT .* FROM settlement_transfers WHERE settlement_id = \$1/.test(s))).to.deep.equal([]);
    // Then its path to submitting, the debit (its accounts made the first time; locked, checked and written in one
    // statement), the transfer, the settlement's move (with the confirmations the chain already shows) and the off-ramp's.
    expect(statements.filter((s) => !/^INSERT INTO ledger_accounts/.test(s)), statements.join('\n')).to.have.length(6);
    expect(statements.filter((s) => /^UPDATE settlements SET confirmations/.test(s))).to.deep.equal([]);
    expect(statements.filter((s) => /FOR NO KEY UPDATE\).*INSERT INTO journal_entries/.test(s))).to.have.length(1);
    // A count no higher than the locked row's writes nothing; a higher one is one UPDATE.
    const counts = await inUnit(pools.deps, async (unit) => {
      const locked = (await settlementOf(unit.em, created.body.id, true))!;
      const same = await statementsOf(ds, () => setConfirmations(unit, locked, locked.confirmations));
      const higher = await statementsOf(ds, () => setConfirmations(unit, locked, locked.confirmations + 1));
      return [same.statements.length, higher.statements.length];
    });
    expect(counts).to.deep.equal([0, 1]);
  });

  it('the sandbox payout unit reads the off-ramp\'s settlement with it: what follows its completion reads nothing more', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '50');
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, key) });
    const { id } = (await offramp(api, key, q.id, customer.wallet.id)).body;
    // Submitted and confirmed here (a chain with every confirmation at once): funded, its payout job left waiting.
    const deepChain = () => chainFor('sandbox', { ...pools.deps.config, sandboxStepMs: 0 });
    expect(await submitOfframp(pools.deps, deepChain, id)).to.equal('submitted');
    expect(await history(id)).to.include('funded');
    const job = { data: { transactionId: id } } as Parameters<typeof sendPayoutJob.process>[0];
    const { result, statements } = await statementsOf(await getDs(), () => sendPayoutJob.process(job, pools.deps));
    expect(result).to.equal('completed');
    expect((await history(id)).slice(-2)).to.deep.equal(['processing', 'completed']);
    expect(statements[0]).to.match(/LEFT JOIN settlements s ON s\.transaction_id = t\.id/);
    expect(statements.filter((s) => /settlements/.test(s)), statements.join('\n')).to.have.length(1);
  });

  it('an archived funding wallet refuses the submission, as before its read joined the off-ramp\'s', async () => {
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '50');
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, key) });
    const created = (await offramp(api, key, q.id, customer.wallet.id)).body;
    const ds = await getDs();
    await ds.query(`UPDATE wallets SET status = 'archived', archived_at = now() WHERE id = $1`, [customer.wallet.id]);
    const refused = await submitOfframp(pools.deps, () => chainFor('sandbox', pools.deps.config), created.id).then(() => null, (err: Error & { code?: string }) => err.code);
    expect(refused).to.equal('resource_archived');
    // The unit rolled back whole: nothing moved, nothing was debited.
    expect(await history(created.id)).to.deep.equal(['created']);
  });
});
