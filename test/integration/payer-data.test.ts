import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, quote, untilStatus } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { captureLogs } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { getConfig, loadConfig } from '../../shared/config.js';
import { openPayerPhone } from '../../shared/domain/payer-data.js';
import { rotateEncryptionKey } from '../../shared/admin/rotate-encryption-key.js';
import { legacyPayerKey, payerKey, payerKeys, splitPayerKeys } from '../../shared/providers/daraja/msisdn.js';
import { KeyedPayerDigests1764500200000 } from '../../migrations/1764500200000-keyed-payer-digests.js';
import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { liveOnramp, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { PayerData1763800032500 } from '../../migrations/1763800032500-payer-data.js';

// CONTRACT §15: a payer's phone and an intent customer's phone and email are sealed at rest and shown only redacted,
// in responses, events, webhook bodies and logs; the jobs that reach the payer open the sealed value.

// A loaded machine prices slowly: the web process waits longer for the pricing pool's rate.
const WEBHOOK_ENV = { QUOTE_WAIT_MS: '10000', WEBHOOKS_ALLOW_LOOPBACK: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '100,150,200', WEBHOOK_TIMEOUT_MS: '1500' };
const digits8 = () => String(Math.floor(Math.random() * 1e8)).padStart(8, '0').replace(/0001$/, '4411');
/** A phone no other run used (its last 4 digits pick no sandbox scenario), and the forms it must never appear in. */
const newPhone = () => `+2547${digits8()}`;
const plainForms = (phone: string) => [phone, phone.slice(1), `0${phone.slice(4)}`];
const shown = (phone: string) => `+254*****${phone.slice(-4)}`;
// beneficiary-encryption.test.ts's fixed rotation keys, so rows rotated by any run keep opening.
const ROTK1 = `rotk1:${Buffer.alloc(32, 11).toString('base64')}`;
const ROTK2 = `rotk2:${Buffer.alloc(32, 12).toString('base64')}`;
const BASE_KEYS = getConfig().encryptionKeys.map((k) => `${k.id}:${k.key.toString('base64')}`);
/** A migration's steps in one transaction of their own, committed when `run` passes. */
async function inTransaction(run: (runner: QueryRunner) => Promise<void>): Promise<void> {
  const runner = (await getDs()).createQueryRunner();
  await runner.startTransaction();
  try {
    await run(runner);
    await runner.commitTransaction();
  } catch (err) {
    await runner.rollbackTransaction();
    throw err;
  } finally {
    await runner.release();
  }
}
const expectNone = (text: string, secrets: string[], where: string) => {
  for (const s of secrets) expect(text, `${where} shows ${s}`).not.to.contain(s);
};

describe('payer personal data: sealed at rest, redacted wherever it is shown', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let walletId: string;
  let hooks: Server;
  const received: string[] = [];
  const logs = captureLogs('debug');

  before(async () => {
    api = await startApi({ env: WEBHOOK_ENV, log: logs.log });
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'], { env: WEBHOOK_ENV, log: logs.log });
    key = (await makeBusiness()).sandboxKey;
    walletId = (await createCustomer(api, key)).wallet.id;
    hooks = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hooks`;
    expect((await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send({ url })).status).to.equal(201);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
    hooks?.closeAllConnections();
    await new Promise((resolve) => hooks?.close(resolve));
  });
  afterEach(expectLedgerSound);

  const createIntent = (customer: Record<string, string>) =>
    api.http.post(`${BASE}/payment-intents`).set(writeHeaders(key))
      .send({ amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' }, customer });
  const collect = (id: string, phone: string) =>
    api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(key)).send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
  const onramp = async (phone: string) => {
    const q = await quote(api, key, { direction: 'onramp', destination_amount: '25', wallet_id: walletId });
    return api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
  };
  const rowJson = async (table: string, id: string) => ((await (await getDs()).query(`SELECT row_to_json(r)::text AS json FROM ${table} r WHERE id = $1`, [id]))[0].json as string);

  it('an intent\'s customer and its collection phone, and an on-ramp\'s payer: ciphertext in the database, redacted forms everywhere else', async () => {
    const [customerPhone, collectPhone, onrampPhone] = [newPhone(), newPhone(), newPhone()];
    const email = `rev${digits8()}@example.com`;
    const secrets = [...plainForms(customerPhone), ...plainForms(collectPhone), ...plainForms(onrampPhone), email];
    const bodies: string[] = [];

    const made = await createIntent({ name: 'Rev Otieno', phone_number: customerPhone, email });
    expect(made.status, made.text).to.equal(201);
    bodies.push(made.text);
    expect(made.body.customer).to.deep.equal({ name: 'Rev Otieno', phone_number: shown(customerPhone), email: 'r***@example.com' });
    const collecting = await collect(made.body.id, collectPhone);
    expect(collecting.status, collecting.text).to.equal(202);
    bodies.push(collecting.text);
    expect(collecting.body.collection.phone_number).to.equal(shown(collectPhone));
    // The providers pool reached the payer: it opened the sealed number.
    const paid = await until(async () => {
      const res = await api.http.get(`${BASE}/payment-intents/${made.body.id}`).set(bearer(key));
      return res.body.status === 'completed' && res;
    });
    bodies.push(paid.text);

    const ramp = await onramp(onrampPhone);
    expect(ramp.status, ramp.text).to.equal(201);
    bodies.push(ramp.text);
    expect(ramp.body.payment_source.phone_number).to.equal(shown(onrampPhone));
    const done = await untilStatus(api, key, ramp.body.id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    bodies.push((await api.http.get(`${BASE}/transactions/${ramp.body.id}`).set(bearer(key))).text);
    bodies.push((await api.http.get(`${BASE}/payment-intents?limit=10`).set(bearer(key))).text);
    bodies.push((await api.http.get(`${BASE}/transactions?limit=10`).set(bearer(key))).text);
    expectNone(bodies.join('\n'), secrets, 'a response');

    // The database: no column holds the number or the email; the sealed copies open to them.
    const ds = await getDs();
    expectNone(await rowJson('payment_intents', made.body.id), secrets, 'payment_intents');
    expectNone(await rowJson('transactions', ramp.body.id), secrets, 'transactions');
    const [intentRow] = await ds.query(`SELECT customer_key_id, payer_phone_key_id, payer_phone_redacted FROM payment_intents WHERE id = $1`, [made.body.id]);
    expect(intentRow).to.deep.equal({ customer_key_id: getConfig().encryptionKeys[0].id, payer_phone_key_id: getConfig().encryptionKeys[0].id, payer_phone_redacted: shown(collectPhone) });
    expect(await openPayerPhone(ds, getConfig(), 'payment_intents', made.body.id)).to.equal(collectPhone);
    expect(await openPayerPhone(ds, getConfig(), 'transactions', ramp.body.id)).to.equal(onrampPhone);
    const columns: { table_name: string; column_name: string }[] = await ds.query(
      `SELECT table_name, column_name FROM information_schema.columns WHERE table_name IN ('transactions', 'payment_intents') AND column_name = 'payer_phone'`,
    );
    expect(columns).to.deep.equal([]);

    // Events (GET /events) and the webhook bodies made of them.
    const events = await api.http.get(`${BASE}/events?limit=100`).set(bearer(key));
    expect(events.status).to.equal(200);
    expect(events.text).to.contain(shown(customerPhone)).and.to.contain(shown(collectPhone)).and.to.contain(shown(onrampPhone)).and.to.contain('r***@example.com');
    expectNone(events.text, secrets, 'GET /events');
    await until(() => received.some((b) => b.includes(ramp.body.id) && b.includes('"completed"')) && received.some((b) => b.includes(made.body.id)));
    expectNone(received.join('\n'), secrets, 'a webhook body');
    expect(received.join('\n')).to.contain(shown(onrampPhone));

    // Logs of the web process and the workers.
    expect(logs.lines().length).to.be.greaterThan(10);
    expectNone(logs.text(), secrets, 'the logs');
  });

  it('logs show a payer phone or email only redacted, wherever a line carries one', () => {
    const phone = newPhone();
    logs.log.info({ phone_number: phone, payer: { email: 'amina@example.com', phone } }, 'payer');
    const line = JSON.parse(logs.lines().at(-1)!);
    expect(line.phone_number).to.equal(shown(phone));
    expect(line.payer).to.deep.equal({ email: 'a***@example.com', phone: shown(phone) });
  });

  it('key rotation re-seals payer data too: the rows move under the new key and still open', async () => {
    const phone = newPhone();
    const made = await createIntent({ phone_number: newPhone() });
    expect(made.status, made.text).to.equal(201);
    const ramp = await onramp(phone);
    expect(ramp.status, ramp.text).to.equal(201);
    await untilStatus(api, key, ramp.body.id, ['completed', 'failed']);
    const config = loadConfig({ ...process.env, ENCRYPTION_KEYS: [ROTK2, ...BASE_KEYS, ROTK1].join(',') });
    const report = await rotateEncryptionKey({ ds: await getDs(), config });
    expect(report.tables).to.have.property('transactions').that.is.at.least(1);
    expect(report.tables).to.have.property('payment_intents').that.is.at.least(1);
    const [tx] = await (await getDs()).query(`SELECT payer_phone_key_id FROM transactions WHERE id = $1`, [ramp.body.id]);
    const [intent] = await (await getDs()).query(`SELECT customer_key_id FROM payment_intents WHERE id = $1`, [made.body.id]);
    expect([tx.payer_phone_key_id, intent.customer_key_id]).to.deep.equal(['rotk2', 'rotk2']);
    expect(await openPayerPhone(await getDs(), config, 'transactions', ramp.body.id)).to.equal(phone);
  });

  it('the migration seals rows written before it and drops the plaintext; its down opens them again', async () => {
    const [customerPhone, collectPhone, onrampPhone] = [newPhone(), newPhone(), newPhone()];
    const made = await createIntent({ phone_number: customerPhone, email: 'migrate@example.com' });
    expect(made.status, made.text).to.equal(201);
    expect((await collect(made.body.id, collectPhone)).status).to.equal(202);
    const ramp = await onramp(onrampPhone);
    expect(ramp.status).to.equal(201);
    await until(async () => (await api.http.get(`${BASE}/payment-intents/${made.body.id}`).set(bearer(key))).body.status === 'completed');
    await untilStatus(api, key, ramp.body.id, ['completed', 'failed']);

    // Rows rotated before (beneficiary-encryption.test.ts's fixed keys, the rotation above) open too.
    const migration = new PayerData1763800032500(loadConfig({ ...process.env, ENCRYPTION_KEYS: [...BASE_KEYS, ROTK2, ROTK1].join(',') }));
    await inTransaction(async (runner) => {
      await migration.down(runner);
      // As before the migration: the plaintext columns.
      const [before] = await runner.query(`SELECT payer_phone, customer FROM payment_intents WHERE id = $1`, [made.body.id]);
      expect(before).to.deep.equal({ payer_phone: collectPhone, customer: { phone_number: customerPhone, email: 'migrate@example.com' } });
      expect((await runner.query(`SELECT payer_phone FROM transactions WHERE id = $1`, [ramp.body.id]))[0].payer_phone).to.equal(onrampPhone);
      await migration.up(runner);
      const secrets = [...plainForms(customerPhone), ...plainForms(collectPhone), ...plainForms(onrampPhone), 'migrate@example.com'];
      const json = async (table: string, id: string) => (await runner.query(`SELECT row_to_json(r)::text AS json FROM ${table} r WHERE id = $1`, [id]))[0].json as string;
      expectNone(await json('payment_intents', made.body.id), secrets, 'payment_intents');
      expectNone(await json('transactions', ramp.body.id), secrets, 'transactions');
      expect(await openPayerPhone(runner, getConfig(), 'transactions', ramp.body.id)).to.equal(onrampPhone);
      const [after] = await runner.query(`SELECT payer_phone_redacted, customer FROM payment_intents WHERE id = $1`, [made.body.id]);
      expect(after).to.deep.equal({ payer_phone_redacted: shown(collectPhone), customer: { phone_number: shown(customerPhone), email: 'm***@example.com' } });
    });
    const res = await api.http.get(`${BASE}/transactions/${ramp.body.id}`).set(bearer(key));
    expect(res.body.payment_source.phone_number).to.equal(shown(onrampPhone));
  });
});

describe('payer personal data in live M-Pesa callbacks', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { QUOTE_WAIT_MS: '20000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('a callback is stored with its phone numbers redacted and the payer\'s digest beside it; the on-ramp is funded by it', async () => {
    const phone = `+2547${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}0011`;
    const id = await liveOnramp(rail, phone);
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    expect(tx.payment_source.phone_number).to.equal(shown(phone));
    const rows: { body: unknown; payer_key: string | null; result: string }[] = await (await getDs()).query(
      `SELECT body, payer_key, result FROM provider_callbacks WHERE body::text LIKE $1`, [`%${tx.payment_source.reference}%`],
    );
    expect(rows.length).to.be.greaterThan(0);
    expect(rows.flatMap((r) => splitPayerKeys(r.payer_key))).to.include(payerKey(getConfig().encryptionKeys, phone));
    const stored = JSON.stringify(rows.map((r) => r.body));
    expectNone(stored, plainForms(phone), 'a stored callback');
    expect(stored).to.contain(`254*****${phone.slice(-4)}`);
  });

  it('payer digests are keyed: the migration re-digests the old plain hashes, and key rotation moves digests under the new key', async () => {
    const phone = `+2547${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}0011`;
    const id = await liveOnramp(rail, phone);
    expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const ds = await getDs();
    const keys = getConfig().encryptionKeys;
    const requestPayer = async () => (await ds.query(`SELECT request->>'payer' AS payer FROM provider_requests WHERE kind = 'collection' AND reference = $1`, [id]))[0].payer;
    expect(await requestPayer()).to.equal(payerKey(keys, phone)).and.match(new RegExp(`^${keys[0].id}:[0-9a-f]{64}$`));
    const legacy = legacyPayerKey(phone)!;
    const callbackKey = async (cbId: string) => (await ds.query(`SELECT payer_key FROM provider_callbacks WHERE id = $1`, [cbId]))[0].payer_key as string | null;
    // As the code before this change left them: the plain hash on the request, on its applied callbacks, and on one still waiting.
    await ds.query(`UPDATE provider_requests SET request = jsonb_set(request, '{payer}', to_jsonb($2::text)) WHERE kind = 'collection' AND reference = $1`, [id, legacy]);
    const reference = `%${(await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.payment_source.reference}%`;
    // Once the pool has applied every callback of this prompt (it may complete by STK Query before its callback is read).
    await until(async () => (await ds.query(`SELECT count(*) FILTER (WHERE processed_at IS NULL) AS waiting, count(*) AS n FROM provider_callbacks WHERE body::text LIKE $1`, [reference]))
      .every((r: { waiting: string; n: string }) => r.waiting === '0' && r.n !== '0'));
    const applied: { id: string }[] = await ds.query(`WITH u AS (UPDATE provider_callbacks SET payer_key = $2 WHERE body::text LIKE $1 AND processed_at IS NOT NULL RETURNING id) SELECT id FROM u`, [reference, legacy]);
    expect(applied.length).to.be.greaterThan(0);
    const [waiting] = await ds.query(`INSERT INTO provider_callbacks (provider, kind, body, body_hash, payer_key) VALUES ('mpesa_daraja', 'stk', '{}', $1, $2) RETURNING id`, [randomUUID(), legacy]);
    try {
      const migration = new KeyedPayerDigests1764500200000(getConfig());
      await inTransaction(async (runner) => {
        await migration.down(runner);
        await migration.up(runner);
      });
      expect(await requestPayer()).to.equal(payerKey(keys, phone));
      expect(await callbackKey(waiting.id), 'a waiting callback follows its request').to.equal(payerKey(keys, phone));
      for (const cb of applied) expect(await callbackKey(cb.id), 'an applied callback keeps no digest').to.equal(null);
      const [left] = await ds.query(`SELECT (SELECT count(*) FROM provider_requests WHERE request::text LIKE $1)::int + (SELECT count(*) FROM provider_callbacks WHERE payer_key LIKE $1)::int AS n`, [`%${legacy}%`]);
      expect(left.n, 'plain hashes left').to.equal(0);

      // Rotation: the waiting callback was digested under the keys listed when it arrived; its request moves to the new key.
      await ds.query(`UPDATE provider_callbacks SET payer_key = $2 WHERE id = $1`, [waiting.id, payerKeys(keys, phone).join(' ')]);
      const rotated = loadConfig({ ...process.env, ENCRYPTION_KEYS: [ROTK2, ...BASE_KEYS, ROTK1].join(',') });
      const report = await rotateEncryptionKey({ ds, config: rotated });
      expect(report.payer_digests.redigested).to.be.at.least(1);
      const moved = await requestPayer();
      expect(moved).to.equal(payerKey(rotated.encryptionKeys, phone)).and.match(/^rotk2:/);
      expect(splitPayerKeys(await callbackKey(waiting.id)), 'the waiting callback still matches its request').to.include(moved);
    } finally {
      await ds.query(`UPDATE provider_callbacks SET processed_at = now(), result = 'test' WHERE id = $1`, [waiting.id]);
    }
  });
});
