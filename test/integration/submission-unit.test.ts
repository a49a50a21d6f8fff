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
import { setConfirmations, settlementOf, transfersColumn, transfersRead } from '../../shared/domain/settlements.js';
import pg from 'pg';
import { testDatabaseUrl } from '../env.js';
import { loadPayout } from '../../workers/providers/payout-request.js';
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
    expect(statements[0]).to.match(/FROM settlements s JOIN transactions t .* FOR UPDATE OF s FOR NO KEY UPDATE OF t/);
    expect(statements.filter((s) => /settlements/.test(s)), statements.join('\n')).to.have.length(1);
  });

  describe('a read that waits for a settlement\'s lock while another unit records a transfer', () => {
    let a: pg.Client;
    let b: pg.Client;
    beforeEach(async () => {
      [a, b] = [new pg.Client(testDatabaseUrl()), new pg.Client(testDatabaseUrl())];
      await Promise.all([a.connect(), b.connect()]);
    });
    afterEach(() => Promise.all([a.end(), b.end()]));

    /** A fresh off-ramp's settlement, and a unit (on `a`, open) recording a 7 USDC transfer to it. */
    const recording = async () => {
      const customer = await createCustomer(api, key);
      await fund(api, key, customer.wallet.id, '50');
      const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, key) });
      const { id } = (await offramp(api, key, q.id, customer.wallet.id)).body;
      const { id: settlementId } = (await settlementOf(await getDs(), id))!;
      await a.query('BEGIN');
      await a.query(`INSERT INTO settlement_transfers (settlement_id, transaction_hash, log_index, amount, block_number, block_hash) VALUES ($1, $2, 0, 7.000000, 1, '0xb1')`, [settlementId, `0x${'ab'.repeat(32)}`]);
      await a.query(`UPDATE settlements SET received_amount = received_amount + 7.000000, updated_at = now() WHERE id = $1`, [settlementId]);
      return { id, settlementId };
    };
    /** `read` on `b` waits for `a`'s lock; `a` commits; the read's answer. */
    const waitedFor = async <T>(read: () => Promise<T>): Promise<T> => {
      await b.query('BEGIN');
      let done = false;
      const answer = read().finally(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(done, 'the read waits for the lock').to.equal(false);
      await a.query('COMMIT');
      const value = await answer;
      await b.query('ROLLBACK');
      return value;
    };

    it('the confirmation\'s read names the transfers only when the settlement it locked is the one it began with', async () => {
      const { settlementId } = await recording();
      const text = `SELECT s.received_amount::text AS received, ${transfersColumn('s')} AS transfers FROM settlements s WHERE s.id = $1 FOR UPDATE OF s`;
      const [waited] = (await waitedFor(() => b.query(text, [settlementId]))).rows;
      expect(waited.received).to.equal('7.000000'); // the settlement as the other unit left it ...
      expect(waited.transfers, 'its transfers as the read began: not used').to.equal(null);
      expect(transfersRead(waited.transfers)).to.equal(undefined);
      const [again] = (await b.query(text, [settlementId])).rows;
      expect(transfersRead(again.transfers)?.counted.map((t) => t.amount)).to.deep.equal(['7.000000']);
    });

    it('the payout\'s read answers what the settlement received with the transfer recorded while it waited', async () => {
      const { id } = await recording();
      const payout = await waitedFor(() => loadPayout({ query: <T>(text: string, params?: unknown[]) => b.query(text, params).then((r) => r.rows as T) } as Parameters<typeof loadPayout>[0], id, true));
      expect(payout?.settlement).to.deep.equal({ transactionId: id, received: { received_amount: '7.000000' } });
    });
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
