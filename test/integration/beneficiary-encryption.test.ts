import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { captureLogs } from '../helpers/log-capture.js';
import { CORRIDOR_EXAMPLES } from '../helpers/corridor-examples.js';
import { getConfig, loadConfig } from '../../shared/config.js';
import { listCorridors } from '../../shared/domain/corridors.js';
import { rotateEncryptionKey } from '../../shared/admin/rotate-encryption-key.js';
import { AdminError } from '../../shared/admin/commands.js';

const BASE = '/api/v1/business/beneficiaries';
const SEALED = 'details_key_id, details_wrapped_key, details_iv, details_tag, details_ciphertext';
// Fixed keys, so rows rotated by an earlier run stay readable by the next one.
const K1 = `rotk1:${Buffer.alloc(32, 11).toString('base64')}`;
const K2 = `rotk2:${Buffer.alloc(32, 12).toString('base64')}`;
const BASE_KEYS = getConfig().encryptionKeys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');
const DEPLOYED = `${K2},${K1},${BASE_KEYS}`;

const kesMobile = (phone: string) => ({ currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Achieng Otieno', details: { phone_number: phone, mobile_network: 'safaricom' } });
const uniquePhone = () => `+2547${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`;

async function keyIds(ids: string[]): Promise<Record<string, string>> {
  const rows: { id: string; details_key_id: string }[] = await (await getDs()).query(`SELECT id, details_key_id FROM beneficiaries WHERE id = ANY($1)`, [ids]);
  return Object.fromEntries(rows.map((r) => [r.id, r.details_key_id]));
}

describe('beneficiary details at rest', () => {
  let api: ApiHarness;
  let biz: TestBusiness;
  let logs: ReturnType<typeof captureLogs>;
  before(async () => {
    logs = captureLogs('debug');
    api = await startApi({ log: logs.log });
    biz = await makeBusiness();
  });
  after(() => api.close());

  it('stores ciphertext only, under the current key id', async () => {
    const phone = uniquePhone();
    const res = await api.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(phone));
    expect(res.status).to.equal(201);
    const [row] = await (await getDs()).query(`SELECT row_to_json(b)::text AS json, b.* FROM beneficiaries b WHERE id = $1`, [res.body.id]);
    expect(row.json).not.to.contain(phone);
    expect(row.json).not.to.contain(phone.slice(1));
    expect(row.json).not.to.contain('safaricom');
    expect(row.details_ciphertext.toString('latin1')).not.to.contain(phone);
    expect(row.details_key_id).to.equal(getConfig().encryptionKeys[0].id);
    expect(row.details_wrapped_key.length).to.equal(60);
    expect(row.details_iv.length).to.equal(12);
    expect(row.details_tag.length).to.equal(16);
  });

  it('never shows a full account number, phone, IBAN or email in responses, logs, Redis, idempotency records, events or jobs', async () => {
    const secrets: string[] = [];
    const bodies: string[] = [];
    const requestIds: string[] = [];
    const seen = (res: { text: string; headers: Record<string, string> }) => {
      requestIds.push(res.headers['x-request-id']);
      bodies.push(res.text);
    };
    for (const c of listCorridors().filter((x) => x.fields.some((f) => f.sensitive))) {
      const valid = CORRIDOR_EXAMPLES[`${c.currency}:${c.payment_method}`].valid;
      for (const f of c.fields) if (f.sensitive && valid[f.name]) secrets.push(valid[f.name]);
      const body = { currency: c.currency, payment_method: c.payment_method, account_holder_name: 'Redaction Check', details: valid };
      const idem = randomUUID();
      const made = await api.http.post(BASE).set(writeHeaders(biz.sandboxKey, idem)).send(body);
      expect(made.status, made.text).to.equal(201);
      seen(made);
      seen(await api.http.post(BASE).set(writeHeaders(biz.sandboxKey, idem)).send(body));
      seen(await api.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send({ ...body, details: { ...valid, unexpected: 'x' } }));
      seen(await api.http.get(`${BASE}/${made.body.id}`).set(bearer(biz.sandboxKey)));
      seen(await api.http.patch(`${BASE}/${made.body.id}`).set(writeHeaders(biz.sandboxKey)).send({ label: 'l' }));
      seen(await api.http.delete(`${BASE}/${made.body.id}`).set(writeHeaders(biz.sandboxKey)));
    }
    // A phone that fails its pattern is not echoed either.
    const wrongCountry = '+255712349876';
    secrets.push(wrongCountry);
    const refused = await api.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(wrongCountry));
    expect(refused.status).to.equal(422);
    seen(refused);
    seen(await api.http.get(`${BASE}?include_archived=true&limit=100`).set(bearer(biz.sandboxKey)));
    const kesPhone = CORRIDOR_EXAMPLES['KES:mobile_money'].valid.phone_number;
    expect(bodies.join('\n')).to.contain(`*********${kesPhone.slice(-4)}`); // the redacted form is there

    const logText = logs.text();
    expect(logText).to.contain('/api/v1/business/beneficiaries'); // the capture really holds the request lines
    const redisValues: string[] = [];
    for (const key of await testRedis().keys(`${getConfig().redisPrefix}:idem:${biz.businessId}:*`)) redisValues.push((await testRedis().get(key)) ?? '');
    expect(redisValues.length).to.be.greaterThan(0);
    const ds = await getDs();
    const events = await ds.query(`SELECT data::text AS t FROM events WHERE business_id = $1`, [biz.businessId]);
    const jobs = await ds.query(`SELECT payload::text AS t FROM outbox_jobs WHERE business_id = $1`, [biz.businessId]);
    // The durable idempotency records of this test's requests (their request ids are the answers' X-Request-Id).
    const records = await ds.query(`SELECT fingerprint || ' ' || body AS t FROM idempotency_records WHERE request_id = ANY($1)`, [requestIds]);
    expect(records.length).to.be.greaterThan(0);
    const everywhere = [...bodies, logText, ...redisValues, ...events.map((e: { t: string }) => e.t), ...jobs.map((j: { t: string }) => j.t), ...records.map((r: { t: string }) => r.t)].join('\n');
    for (const secret of secrets) expect(everywhere.split("\n").filter((l) => l.includes(secret)).map((l) => l.slice(0, 600)), secret).to.deep.equal([]);
  });

  it('binds each ciphertext to its row: sealed details moved to another row do not open', async () => {
    const ds = await getDs();
    const a = (await api.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(uniquePhone()))).body.id;
    const b = (await api.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(uniquePhone()))).body.id;
    const [original] = await ds.query(`SELECT ${SEALED} FROM beneficiaries WHERE id = $1`, [b]);
    await ds.query(`UPDATE beneficiaries t SET (${SEALED}) = (SELECT ${SEALED} FROM beneficiaries WHERE id = $1) WHERE t.id = $2`, [a, b]);
    try {
      const res = await api.http.get(`${BASE}/${b}`).set(bearer(biz.sandboxKey));
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
    } finally {
      // Restored whatever happens: a row left unopenable would fail every later key rotation over this database.
      await ds.query(`UPDATE beneficiaries SET (${SEALED}) = ($2, $3, $4, $5, $6) WHERE id = $1`, [b, ...Object.values(original)]);
    }
    expect((await api.http.get(`${BASE}/${b}`).set(bearer(biz.sandboxKey))).status).to.equal(200);
  });
});

describe('encryption key rotation', function () {
  this.timeout(60_000);
  const apis: ApiHarness[] = [];
  const withKeys = async (keys: string) => {
    const h = await startApi({ env: { ENCRYPTION_KEYS: keys } });
    apis.push(h);
    return h;
  };
  after(async () => {
    for (const h of apis) await h.close();
  });

  it('re-encrypts every row under the new first key while old rows keep decrypting throughout', async () => {
    const biz = await makeBusiness();
    const before = await withKeys(K1);
    const phones = [uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone()];
    const ids: string[] = [];
    for (const p of phones) ids.push((await before.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(p))).body.id);
    expect(Object.values(await keyIds(ids))).to.deep.equal(Array(5).fill('rotk1'));
    const ds = await getDs();
    const sealedBefore = await ds.query(`SELECT id, details_ciphertext, details_wrapped_key FROM beneficiaries WHERE id = ANY($1)`, [ids]);

    // The deploy: the new key first, the old one still listed.
    const deployed = await withKeys(DEPLOYED);
    const phone = uniquePhone();
    const fresh = await deployed.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(phone));
    ids.push(fresh.body.id);
    phones.push(phone);
    expect((await keyIds([fresh.body.id]))[fresh.body.id]).to.equal('rotk2');

    const readAll = async (h: ApiHarness) => {
      for (const [i, id] of ids.entries()) {
        const res = await h.http.get(`${BASE}/${id}`).set(bearer(biz.sandboxKey));
        expect(res.status, res.text).to.equal(200);
        expect(res.body.details.phone_number).to.equal(`*********${phones[i].slice(-4)}`);
      }
    };
    await readAll(deployed);

    let mixedReads = 0;
    let lastState = '';
    const report = await rotateEncryptionKey({ ds, config: loadConfig({ ...process.env, ENCRYPTION_KEYS: DEPLOYED }) }, {
      batchSize: 2,
      onBatch: async () => {
        const state = Object.values(await keyIds(ids)).sort().join(',');
        if (state === lastState) return;
        lastState = state;
        if (state.includes('rotk1') && state.includes('rotk2')) {
          await readAll(deployed); // mid-rotation: rows under both keys open
          mixedReads += 1;
        }
      },
    });
    expect(mixedReads).to.be.greaterThan(0);
    expect(report).to.deep.include({ current_key_id: 'rotk2', remaining: 0, failed: [] });
    expect(report.rotated).to.be.at.least(5);
    expect(Object.values(await keyIds(ids))).to.deep.equal(Array(6).fill('rotk2'));
    const sealedAfter = await ds.query(`SELECT id, details_ciphertext, details_wrapped_key FROM beneficiaries WHERE id = ANY($1)`, [ids.slice(0, 5)]);
    for (const row of sealedAfter) {
      const old = sealedBefore.find((r: { id: string }) => r.id === row.id);
      expect(row.details_ciphertext.equals(old.details_ciphertext)).to.equal(false);
      expect(row.details_wrapped_key.equals(old.details_wrapped_key)).to.equal(false);
    }

    // The old key can now be dropped; a process that only has it can no longer open anything.
    await readAll(await withKeys(K2));
    const stale = await before.http.get(`${BASE}/${ids[0]}`).set(bearer(biz.sandboxKey));
    expect(stale.status).to.equal(503);
    expect(stale.body.error.code).to.equal('service_unavailable');
    const again = await rotateEncryptionKey({ ds, config: loadConfig({ ...process.env, ENCRYPTION_KEYS: DEPLOYED }) });
    expect(again).to.deep.include({ rotated: 0, remaining: 0 });
  });

  it('a listed key id with other bytes (or a corrupt row) answers 503, never 500, and logs only the key id', async () => {
    const biz = await makeBusiness();
    const id = (await (await withKeys(K2)).http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(uniquePhone()))).body.id;
    const logs = captureLogs('debug');
    const impostor = Buffer.alloc(32, 13).toString('base64');
    const wrong = await startApi({ env: { ENCRYPTION_KEYS: `rotk2:${impostor}` }, log: logs.log });
    apis.push(wrong);
    const res = await wrong.http.get(`${BASE}/${id}`).set(bearer(biz.sandboxKey));
    expect(res.status, res.text).to.equal(503);
    expect(res.body.error.code).to.equal('service_unavailable');
    expect(res.headers['retry-after']).to.match(/^\d+$/);
    expect(res.text).not.to.match(/rotk2|unable to authenticate/);
    const line = logs.lines().map((l) => JSON.parse(l)).find((l) => l.keyId === 'rotk2');
    expect(line, logs.text()).to.deep.include({ reason: 'authentication_failed' });
    expect(logs.text()).not.to.contain(impostor);
    expect(logs.text()).not.to.contain('stack');
  });

  it('refuses to start when a row is under a key it does not hold; the admin CLI then finishes the job', async () => {
    const biz = await makeBusiness();
    const old = await withKeys(K1);
    const id = (await old.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(uniquePhone()))).body.id;
    const err = await rotateEncryptionKey({ ds: await getDs(), config: loadConfig({ ...process.env, ENCRYPTION_KEYS: K2 }) }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(AdminError);
    expect((err as Error).message).to.contain('"rotk1"');
    expect((await keyIds([id]))[id]).to.equal('rotk1');

    const cli = await rotateCli();
    expect(cli.code, cli.stderr).to.equal(0);
    const out = JSON.parse(cli.stdout);
    expect(out).to.deep.include({ current_key_id: 'rotk2', remaining: 0, failed: [] });
    expect(out.rotated).to.be.at.least(1);
    expect((await keyIds([id]))[id]).to.equal('rotk2');
  });

  it('the admin CLI reports a row that will not open, leaves it as it is, and exits 1', async () => {
    const biz = await makeBusiness();
    const old = await withKeys(K1);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await old.http.post(BASE).set(writeHeaders(biz.sandboxKey)).send(kesMobile(uniquePhone()))).body.id);
    const ds = await getDs();
    const [original] = await ds.query(`SELECT ${SEALED} FROM beneficiaries WHERE id = $1`, [ids[1]]);
    // The second row now holds the first row's ciphertext: bound to another row, it does not open.
    await ds.query(`UPDATE beneficiaries t SET (${SEALED}) = (SELECT ${SEALED} FROM beneficiaries WHERE id = $1) WHERE t.id = $2`, [ids[0], ids[1]]);
    try {
      const cli = await rotateCli();
      expect(cli.code, cli.stderr).to.equal(1);
      const out = JSON.parse(cli.stdout);
      expect(out.failed).to.deep.equal([{ table: 'beneficiaries', id: ids[1] }]);
      expect(out.remaining).to.equal(1);
      expect(await keyIds(ids)).to.deep.equal({ [ids[0]]: 'rotk2', [ids[1]]: 'rotk1' });
    } finally {
      await ds.query(`UPDATE beneficiaries SET (${SEALED}) = ($2, $3, $4, $5, $6) WHERE id = $1`, [ids[1], ...Object.values(original)]);
    }
    expect((await rotateCli()).code).to.equal(0);
    expect((await keyIds(ids))[ids[1]]).to.equal('rotk2');
  });
});

function rotateCli(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('node_modules/.bin/tsx', ['scripts/admin.ts', 'rotate-encryption-key', '--json'], {
      env: { ...process.env, ENCRYPTION_KEYS: DEPLOYED },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
