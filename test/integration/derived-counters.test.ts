import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, kesBeneficiary, offramp, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { IntegrityChecksOneStatement1764700000000 } from '../../migrations/1764700000000-integrity-checks-one-statement.js';

// A counter stored beside the facts it sums is tied to them by the database (migrations/*-derived-counters.ts): a
// settlement's received_amount to its transfers, a payment intent's received and confirmed amounts to its deposits.
// Whatever code path writes one out of step, its transaction fails at commit and leaves nothing.
describe('counters are what their facts sum to, checked by the database at commit', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeBusiness()).sandboxKey;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  async function refusedAtCommit(sql: string, params: unknown[], pattern: RegExp): Promise<void> {
    const ds = await getDs();
    const err = await ds.transaction((em) => em.query(sql, params)).then(() => null, (e: { code?: string; message: string }) => e);
    expect(err, 'the commit was refused').to.not.equal(null);
    expect(err!.code).to.equal('23514');
    expect(err!.message).to.match(pattern);
  }

  it('a settlement\'s received_amount follows its transfers through a real lifecycle, and cannot be bumped alone', async () => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, '50');
    const beneficiary = await kesBeneficiary(api, key);
    const tx = (await offramp(api, key, (await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary })).id, wallet.id)).body;
    // Two transfers: the counter is their sum at every commit.
    for (const amount of ['4', '6.15']) {
      expect((await api.http.post(`${BASE}/sandbox/settlements/${tx.id}/transfer`).set(writeHeaders(key)).send({ amount })).status).to.equal(202);
    }
    expect((await untilStatus(api, key, tx.id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const [{ id }] = await (await getDs()).query(`SELECT id FROM settlements WHERE transaction_id = $1`, [tx.id]);
    await refusedAtCommit(`UPDATE settlements SET received_amount = received_amount + 1 WHERE id = $1`, [id], /its transfers sum to 10\.15/);
    await refusedAtCommit(`DELETE FROM settlement_transfers WHERE settlement_id = $1 AND amount = 4`, [id], /holds received_amount 10\.15/);
    const view = (await api.http.get(`${BASE}/transactions/${tx.id}/settlement`).set(bearer(key))).body;
    expect(view.received_amount).to.equal('10.150000');
  });

  it('a payment intent\'s received and confirmed amounts follow its deposits, and cannot be changed alone', async () => {
    const res = await api.http.post(`${BASE}/payment-intents`).set(writeHeaders(key))
      .send({ amount: { currency: 'KES', value: '1500.00' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect((await api.http.post(`${BASE}/sandbox/payment-intents/${res.body.id}/pay`).set(writeHeaders(key)).send({ method: 'stablecoin' })).status).to.equal(202);
    await until(async () => (await api.http.get(`${BASE}/payment-intents/${res.body.id}`).set(bearer(key))).body.status === 'completed', { what: 'the intent completed' });
    await refusedAtCommit(`UPDATE payment_intents SET confirmed_amount = confirmed_amount + 0.000001 WHERE id = $1`, [res.body.id], /its deposits count/);
    await refusedAtCommit(`UPDATE payment_intents SET received_amount = 0 WHERE id = $1`, [res.body.id], /its deposits count/);
    await refusedAtCommit(`UPDATE treasury_deposits SET late_payment = true WHERE payment_intent_id = $1`, [res.body.id], /its deposits count 0 and 0/);
  });

  it('each check reads its row in one statement (issue 39); the migration\'s down puts back the two-statement form', async () => {
    const ds = await getDs();
    const runner = ds.createQueryRunner();
    await runner.startTransaction();
    try {
      const bodies = async () => Object.fromEntries((await runner.query(`SELECT proname, prosrc FROM pg_proc WHERE proname IN ('ledger_entry_balanced', 'settlement_received_matches_transfers')`))
        .map((r: { proname: string; prosrc: string }) => [r.proname, r.prosrc]));
      const statements = (body: string) => body.match(/\bSELECT\b/g)!.length - (body.match(/\(SELECT\b/g)?.length ?? 0);
      const now = await bodies();
      expect(statements(now.ledger_entry_balanced), 'ledger check').to.equal(1);
      expect(statements(now.settlement_received_matches_transfers), 'settlement check').to.equal(1);
      const migration = new IntegrityChecksOneStatement1764700000000();
      await migration.down(runner);
      const first = await bodies();
      expect(first.ledger_entry_balanced).to.include('IF EXISTS (SELECT 1 FROM ledger_postings');
      expect(first.settlement_received_matches_transfers).to.include('SELECT received_amount INTO stored');
      await migration.up(runner);
      expect(await bodies()).to.deep.equal(now);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
