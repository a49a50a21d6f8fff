import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { CORRIDOR_EXAMPLES } from '../helpers/corridor-examples.js';
import { listCorridors } from '../../shared/domain/corridors.js';
import { loadActiveBeneficiary } from '../../shared/domain/beneficiaries.js';
import { getConfig, loadConfig } from '../../shared/config.js';
import { rotateEncryptionKey } from '../../shared/admin/rotate-encryption-key.js';
import { AdminError } from '../../shared/admin/commands.js';

const BASE = '/api/v1/business/beneficiaries';
const KES_MOBILE = { currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Wanjiku Kamau', details: { phone_number: '+254712345678', mobile_network: 'safaricom' } };

function expectError(res: { status: number; body: any }, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.error.code).to.equal(code);
}

describe('beneficiaries API', () => {
  let api: ApiHarness;
  let biz: TestBusiness;
  const create = (body: object, key = biz.sandboxKey, idem?: string) => api.http.post(BASE).set(writeHeaders(key, idem)).send(body);

  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
  });
  after(() => api.close());

  describe('GET /beneficiaries/requirements', () => {
    it('answers every corridor\'s fields and a closed JSON Schema', async () => {
      for (const c of listCorridors()) {
        const res = await api.http.get(`${BASE}/requirements`).query({ currency: c.currency, payment_method: c.payment_method }).set(bearer(biz.sandboxKey));
        expect(res.status, `${c.currency} ${c.payment_method}`).to.equal(200);
        expect(res.body).to.deep.equal({ currency: c.currency, payment_method: c.payment_method, fields: c.fields, schema: c.schema });
        expect(res.body.schema.additionalProperties).to.equal(false);
      }
      const kes = await api.http.get(`${BASE}/requirements?currency=KES&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
      expect(kes.body.fields.find((f: { name: string }) => f.name === 'phone_number')).to.include({ required: true, sensitive: true, type: 'string' });
    });

    it('reads a currency in any case as its upper-case code', async () => {
      const upper = await api.http.get(`${BASE}/requirements?currency=KES&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
      for (const code of ['kes', 'Kes', 'kEs']) {
        const res = await api.http.get(`${BASE}/requirements?currency=${code}&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
        expect(res.status, code).to.equal(200);
        expect(res.body.currency).to.equal('KES');
        expect(res.body).to.deep.equal(upper.body);
      }
      const unknown = await api.http.get(`${BASE}/requirements?currency=xyz&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
      expectError(unknown, 422, 'unsupported_corridor');
      expect(unknown.body.error.details).to.include({ currency: 'XYZ', payment_method: 'mobile_money' });
      const ngn = await api.http.get(`${BASE}/requirements?currency=ngn&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
      expectError(ngn, 422, 'unsupported_corridor');
      expect(ngn.body.error.details.supported_payment_methods).to.deep.equal(['bank_transfer']);
    });

    it('400 for a currency that is not 3 letters or a payment_method outside the six, or a missing one', async () => {
      for (const q of ['currency=KE&payment_method=mobile_money', 'currency=KESS&payment_method=mobile_money', 'currency=K1S&payment_method=mobile_money',
        'currency=ke&payment_method=mobile_money', 'currency=kess&payment_method=mobile_money', 'currency=k%C3%A9s&payment_method=mobile_money',
        'currency=K%20S&payment_method=mobile_money', 'currency=&payment_method=mobile_money',
        'currency=KES&payment_method=cash', 'payment_method=mobile_money', 'currency=KES', 'currency=KES&payment_method=mobile_money&extra=1']) {
        const res = await api.http.get(`${BASE}/requirements?${q}`).set(bearer(biz.sandboxKey));
        expectError(res, 400, 'invalid_request');
        expect(res.body.error.details[0]).to.have.keys('path', 'in', 'message');
      }
    });

    it('422 unsupported_corridor for a well-formed pair we do not serve', async () => {
      const res = await api.http.get(`${BASE}/requirements?currency=NGN&payment_method=mobile_money`).set(bearer(biz.sandboxKey));
      expectError(res, 422, 'unsupported_corridor');
      expect(res.body.error.details.supported_payment_methods).to.deep.equal(['bank_transfer']);
      expectError(await api.http.get(`${BASE}/requirements?currency=XYZ&payment_method=swift_transfer`).set(bearer(biz.sandboxKey)), 422, 'unsupported_corridor');
    });
  });

  describe('POST /beneficiaries', () => {
    it('creates a beneficiary in every corridor, details redacted', async () => {
      for (const c of listCorridors()) {
        const valid = CORRIDOR_EXAMPLES[`${c.currency}:${c.payment_method}`].valid;
        const res = await create({ currency: c.currency, payment_method: c.payment_method, account_holder_name: 'Pat Payee', details: valid, label: 'Main' });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        expect(res.body).to.include({ currency: c.currency, payment_method: c.payment_method, status: 'active', label: 'Main', archived_at: null });
        for (const f of c.fields.filter((x) => valid[x.name] !== undefined)) {
          const shown = res.body.details[f.name];
          expect(shown, f.name).to.equal(f.sensitive ? '*'.repeat(valid[f.name].length - 4) + valid[f.name].slice(-4) : valid[f.name]);
        }
        expect(res.body.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      }
    });

    it('422 requirements_not_met with field-level details for each corridor\'s invalid details', async () => {
      for (const c of listCorridors()) {
        const example = CORRIDOR_EXAMPLES[`${c.currency}:${c.payment_method}`];
        const [name, bad] = Object.entries(example.invalid)[0];
        const res = await create({ currency: c.currency, payment_method: c.payment_method, account_holder_name: 'Pat', details: { ...example.valid, [name]: bad } });
        expectError(res, 422, 'requirements_not_met');
        expect(res.body.error.details).to.deep.equal([{ path: `details.${name}`, message: res.body.error.details[0].message }]);
        expect(JSON.stringify([res.body.error.message, res.body.error.details])).not.to.contain(bad);
      }
      const missing = await create({ ...KES_MOBILE, details: {} });
      expect(missing.body.error.details.map((d: { path: string }) => d.path).sort()).to.deep.equal(['details.mobile_network', 'details.phone_number']);
    });

    it('422 unsupported_corridor for a pair we do not serve', async () => {
      expectError(await create({ ...KES_MOBILE, currency: 'NGN' }), 422, 'unsupported_corridor');
      expectError(await create({ ...KES_MOBILE, currency: 'ngn' }), 422, 'unsupported_corridor');
      expectError(await create({ ...KES_MOBILE, currency: 'xyz' }), 422, 'unsupported_corridor');
    });

    it('accepts a lower-case currency and stores it upper-cased', async () => {
      const res = await create({ ...KES_MOBILE, currency: 'kes' });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      expect(res.body.currency).to.equal('KES');
      expect((await api.http.get(`${BASE}/${res.body.id}`).set(bearer(biz.sandboxKey))).body.currency).to.equal('KES');
      const rows = await (await getDs()).query('SELECT currency FROM beneficiaries WHERE id = $1', [res.body.id]);
      expect(rows[0].currency).to.equal('KES');
    });

    it('400 for schema violations of the request itself', async () => {
      const bodies = [
        { ...KES_MOBILE, nickname: 'x' },
        { ...KES_MOBILE, account_holder_name: '' },
        { ...KES_MOBILE, account_holder_name: 'a'.repeat(141) },
        { ...KES_MOBILE, label: 'a'.repeat(121) },
        { ...KES_MOBILE, details: 'phone' },
        { ...KES_MOBILE, currency: 'KESS' },
        { ...KES_MOBILE, currency: 'ke' },
        { ...KES_MOBILE, currency: 'K3S' },
        { ...KES_MOBILE, currency: 'kés' },
        { ...KES_MOBILE, payment_method: 'cash' },
        { ...KES_MOBILE, customer_id: 'not-a-uuid' },
        { currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'x' },
      ];
      for (const body of bodies) expectError(await create(body), 400, 'invalid_request');
      expect((await create({ ...KES_MOBILE, account_holder_name: 'a'.repeat(140), label: 'b'.repeat(120) })).status).to.equal(201);
    });

    it('links a customer of this business and environment; 404 for any other, 409 for an archived one', async () => {
      const made = await api.http.post('/api/v1/business/customers').set(writeHeaders(biz.sandboxKey)).send({ external_reference: `c-${randomUUID()}` });
      expect(made.status).to.equal(201);
      const res = await create({ ...KES_MOBILE, customer_id: made.body.id });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      expect(res.body.customer_id).to.equal(made.body.id);
      for (const [customerId, key] of [[made.body.id, biz.liveKey], [randomUUID(), biz.sandboxKey]]) {
        const missing = await create({ ...KES_MOBILE, customer_id: customerId }, key);
        expectError(missing, 404, 'not_found');
        expect(missing.body.error.details).to.deep.equal({ param: 'customer_id' });
      }
      await (await getDs()).query(`UPDATE customers SET status = 'archived', archived_at = now() WHERE id = $1`, [made.body.id]);
      expectError(await create({ ...KES_MOBILE, customer_id: made.body.id }), 409, 'resource_archived');
    });

    it('is idempotent: the same Idempotency-Key twice makes one row and replays the answer', async () => {
      const own = await makeBusiness();
      const idem = randomUUID();
      const first = await create(KES_MOBILE, own.sandboxKey, idem);
      const second = await create(KES_MOBILE, own.sandboxKey, idem);
      expect(first.status).to.equal(201);
      expect(second.status).to.equal(201);
      expect(second.headers['idempotent-replayed']).to.equal('true');
      expect(second.text).to.equal(first.text);
      const rows = await (await getDs()).query(`SELECT count(*)::int AS n FROM beneficiaries WHERE business_id = $1`, [own.businessId]);
      expect(rows[0].n).to.equal(1);
      expectError(await create({ ...KES_MOBILE, label: 'other' }, own.sandboxKey, idem), 422, 'idempotency_key_reused');
    });
  });

  describe('reading, labelling and archiving', () => {
    it('GET one answers the redacted details; another business or environment gets 404', async () => {
      const made = await create(KES_MOBILE);
      const res = await api.http.get(`${BASE}/${made.body.id}`).set(bearer(biz.sandboxKey));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal(made.body);
      expectError(await api.http.get(`${BASE}/${made.body.id}`).set(bearer(biz.liveKey)), 404, 'not_found');
      const other = await makeBusiness();
      expectError(await api.http.get(`${BASE}/${made.body.id}`).set(bearer(other.sandboxKey)), 404, 'not_found');
      expectError(await api.http.patch(`${BASE}/${made.body.id}`).set(writeHeaders(other.sandboxKey)).send({ label: 'x' }), 404, 'not_found');
      expectError(await api.http.delete(`${BASE}/${made.body.id}`).set(writeHeaders(other.sandboxKey)), 404, 'not_found');
      expectError(await api.http.get(`${BASE}/not-a-uuid`).set(bearer(biz.sandboxKey)), 400, 'invalid_request');
    });

    it('lists newest first without details, paginated, scoped to the environment', async () => {
      const own = await makeBusiness();
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push((await create({ ...KES_MOBILE, label: `n${i}` }, own.sandboxKey)).body.id);
      const liveOnly = (await create(KES_MOBILE, own.liveKey)).body.id;
      const page1 = await api.http.get(`${BASE}?limit=2`).set(bearer(own.sandboxKey));
      expect(page1.status).to.equal(200);
      expect(page1.body.data.map((b: { id: string }) => b.id)).to.deep.equal([ids[2], ids[1]]);
      expect(page1.body.has_more).to.equal(true);
      for (const item of page1.body.data) expect(item).not.to.have.property('details');
      const page2 = await api.http.get(`${BASE}?limit=2&starting_after=${page1.body.next_cursor}`).set(bearer(own.sandboxKey));
      expect(page2.body).to.deep.include({ has_more: false, next_cursor: null });
      expect(page2.body.data.map((b: { id: string }) => b.id)).to.deep.equal([ids[0]]);
      const live = await api.http.get(BASE).set(bearer(own.liveKey));
      expect(live.body.data.map((b: { id: string }) => b.id)).to.deep.equal([liveOnly]);
      expectError(await api.http.get(`${BASE}?limit=0`).set(bearer(own.sandboxKey)), 400, 'invalid_request');
      expectError(await api.http.get(`${BASE}?starting_after=garbage`).set(bearer(own.sandboxKey)), 400, 'invalid_request');
      expectError(await api.http.get(`${BASE}?include_archived=maybe`).set(bearer(own.sandboxKey)), 400, 'invalid_request');
    });

    it('PATCH sets and clears the label; label is required, at most 120, and alone', async () => {
      const id = (await create(KES_MOBILE)).body.id;
      const patch = (body: unknown) => api.http.patch(`${BASE}/${id}`).set(writeHeaders(biz.sandboxKey)).send(body as object);
      const set = await patch({ label: 'Supplier A' });
      expect(set.status).to.equal(200);
      expect(set.body).to.include({ id, label: 'Supplier A' });
      expect(set.body).not.to.have.property('details');
      expect(Date.parse(set.body.updated_at)).to.be.at.least(Date.parse(set.body.created_at));
      expect((await patch({ label: null })).body.label).to.equal(null);
      expect((await patch({ label: 'x'.repeat(120) })).status).to.equal(200);
      for (const bad of [{}, { label: 'x'.repeat(121) }, { label: 5 }, { label: 'ok', currency: 'UGX' }, { details: {} }]) expectError(await patch(bad), 400, 'invalid_request');
      expect((await api.http.get(`${BASE}/${id}`).set(bearer(biz.sandboxKey))).body.label).to.equal('x'.repeat(120));
    });

    it('DELETE archives: archived_at set, out of the default list, repeat-safe, read-only, unusable for quotes', async () => {
      const own = await makeBusiness();
      const id = (await create(KES_MOBILE, own.sandboxKey)).body.id;
      const res = await api.http.delete(`${BASE}/${id}`).set(writeHeaders(own.sandboxKey));
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ id, status: 'archived' });
      expect(res.body.archived_at).to.match(/Z$/);
      const again = await api.http.delete(`${BASE}/${id}`).set(writeHeaders(own.sandboxKey));
      expect(again.status).to.equal(200);
      expect(again.body.archived_at).to.equal(res.body.archived_at);
      expect((await api.http.get(BASE).set(bearer(own.sandboxKey))).body.data).to.deep.equal([]);
      const all = await api.http.get(`${BASE}?include_archived=true`).set(bearer(own.sandboxKey));
      expect(all.body.data.map((b: { id: string; status: string }) => [b.id, b.status])).to.deep.equal([[id, 'archived']]);
      expect((await api.http.get(`${BASE}/${id}`).set(bearer(own.sandboxKey))).body.status).to.equal('archived');
      expectError(await api.http.patch(`${BASE}/${id}`).set(writeHeaders(own.sandboxKey)).send({ label: 'x' }), 409, 'resource_archived');
      const tenant = { businessId: own.businessId, environment: 'sandbox' as const };
      const err = await loadActiveBeneficiary(await getDs(), getConfig().encryptionKeys, tenant, id).then(() => null, (e: unknown) => e);
      expect(err).to.include({ code: 'resource_archived' });
    });

    it('loadActiveBeneficiary hands quotes the plaintext details and corridor, within the tenant only', async () => {
      const own = await makeBusiness();
      const id = (await create(KES_MOBILE, own.sandboxKey)).body.id;
      const keys = getConfig().encryptionKeys;
      const active = await loadActiveBeneficiary(await getDs(), keys, { businessId: own.businessId, environment: 'sandbox' }, id);
      expect(active.details).to.deep.equal(KES_MOBILE.details);
      expect(active.corridor.provider).to.equal('mpesa_daraja');
      const err = await loadActiveBeneficiary(await getDs(), keys, { businessId: own.businessId, environment: 'live' }, id).then(() => null, (e: unknown) => e);
      expect(err).to.include({ code: 'not_found' });
    });
  });

  describe('scopes', () => {
    it('403 insufficient_scope without beneficiaries:read or beneficiaries:write', async () => {
      const readOnly = await makeKey(biz.businessId, { scopes: ['beneficiaries:read'] });
      const none = await makeKey(biz.businessId, { scopes: ['customers:read'] });
      expect((await api.http.get(BASE).set(bearer(readOnly.key))).status).to.equal(200);
      const denied = await create(KES_MOBILE, readOnly.key);
      expectError(denied, 403, 'insufficient_scope');
      expect(denied.body.error.details).to.deep.equal({ required_scope: 'beneficiaries:write' });
      expectError(await api.http.get(BASE).set(bearer(none.key)), 403, 'insufficient_scope');
      expectError(await api.http.get(`${BASE}/requirements?currency=KES&payment_method=paybill`).set(bearer(none.key)), 403, 'insufficient_scope');
      expectError(await api.http.delete(`${BASE}/${randomUUID()}`).set(writeHeaders(readOnly.key)), 403, 'insufficient_scope');
    });
  });

  it('documents every beneficiary operation in the OpenAPI document', async () => {
    const doc = (await api.http.get('/openapi.json')).body;
    const ops = Object.entries(doc.paths as Record<string, Record<string, { operationId: string; 'x-required-scope': string }>>)
      .filter(([p]) => p.startsWith(BASE))
      .flatMap(([, methods]) => Object.values(methods).map((op) => `${op.operationId}:${op['x-required-scope']}`));
    expect(ops.sort()).to.deep.equal([
      'archiveBeneficiary:beneficiaries:write', 'createBeneficiary:beneficiaries:write', 'getBeneficiary:beneficiaries:read',
      'getBeneficiaryRequirements:beneficiaries:read', 'listBeneficiaries:beneficiaries:read', 'updateBeneficiary:beneficiaries:write',
    ]);
  });
});

describe('live beneficiaries and the development encryption key', () => {
  const DEV_KEY = Buffer.alloc(32, 7).toString('base64');
  const body = { currency: 'CAD', payment_method: 'email_transfer', account_holder_name: 'Ada Lovelace', details: { email: 'ada@example.com' } };

  // Unset, or the public development key listed first under any id (as step 1 of a rotation off it would).
  for (const [name, keys] of [['unset', ''], ['renamed and listed first', `mine:${DEV_KEY},other:${Buffer.alloc(32, 3).toString('base64')}`]]) {
    it(`are refused (503) while the encrypting key is the development key (${name})`, async () => {
      const api = await startApi({ env: { ENCRYPTION_KEYS: keys } });
      try {
        const biz = await makeBusiness();
        const live = await api.http.post('/api/v1/business/beneficiaries').set(writeHeaders(biz.liveKey)).send(body);
        expect(live.status, JSON.stringify(live.body)).to.equal(503);
        expect(live.body.error.message).to.match(/ENCRYPTION_KEYS/);
        if (keys === '') {
          // (Only here: a sandbox row sealed under the renamed key would outlive the test under an id nothing else lists.)
          const sandbox = await api.http.post('/api/v1/business/beneficiaries').set(writeHeaders(biz.sandboxKey)).send(body);
          expect(sandbox.status, JSON.stringify(sandbox.body)).to.equal(201);
        }
      } finally {
        await api.close();
      }
    });
  }

  it('key rotation refuses to move live details under the development key', async () => {
    const api = await startApi();
    try {
      const biz = await makeBusiness();
      const live = await api.http.post('/api/v1/business/beneficiaries').set(writeHeaders(biz.liveKey)).send(body);
      expect(live.status, JSON.stringify(live.body)).to.equal(201);
    } finally {
      await api.close();
    }
    const configured = getConfig().encryptionKeys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');
    const config = loadConfig({ ...process.env, ENCRYPTION_KEYS: `dev1:${DEV_KEY},${configured.replace(/(^|,)dev1:[^,]*/, '')}` });
    const err = await rotateEncryptionKey({ ds: await getDs(), config }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(AdminError);
    expect((err as Error).message).to.match(/public development key/);
    expect((err as Error).message).not.to.contain(DEV_KEY);
  });
});
