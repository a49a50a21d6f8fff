// The OpenAPI document's examples are what the API answers: every example matches its schema, and the on-ramp and
// off-ramp transaction examples have the shape (fields, null or not, decimals of each amount) of real sandbox answers.
import { expect } from 'chai';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { fund, kesBeneficiary, offramp, quote, untilStatus } from '../helpers/ramps.js';
import { responseAjv, type OpenApi } from '../fuzz/operations.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Every example in the document with the JSON pointer of the schema it illustrates. */
function examplesOf(node: unknown, at: string, out: { at: string; schema: string; value: unknown }[] = []): typeof out {
  if (!node || typeof node !== 'object') return out;
  const s = node as Record<string, unknown>;
  if (Array.isArray(s.examples)) s.examples.forEach((value, i) => out.push({ at: `${at}/examples/${i}`, schema: at, value }));
  // A media type's named examples illustrate its `schema`.
  else if (s.examples && typeof s.examples === 'object' && s.schema) {
    for (const [name, ex] of Object.entries(s.examples as Record<string, { value: unknown }>)) out.push({ at: `${at}/examples/${name}`, schema: `${at}/schema`, value: ex.value });
  }
  for (const [key, child] of Object.entries(s)) {
    if (key === 'examples' || key === 'example') continue;
    examplesOf(child, `${at}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, out);
  }
  return out;
}

/** What a value looks like: its fields, null or not, each amount's number of decimals (not the values themselves). */
function shape(value: Json): Json {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'string' && /^(0|[1-9][0-9]*)\.[0-9]+$/.test(value)) return `decimal(${value.split('.')[1]!.length})`;
    return value === null ? 'null' : typeof value;
  }
  if (Array.isArray(value)) return value.map(shape);
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, shape(value[k]!)]));
}

describe('the OpenAPI examples against the schemas and the real answers', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let doc: OpenApi;
  let ajv: Ajv2020;
  const validator = (pointer: string) => ajv.compile({ $ref: `openapi.json#${pointer}` });
  const matches = (name: string, body: unknown) => {
    const fn = validator(`/components/schemas/${name}`);
    expect(fn(body), `${name}: ${JSON.stringify(fn.errors?.slice(0, 3))}`).to.equal(true);
  };

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    doc = (await api.http.get('/openapi.json')).body;
    ajv = responseAjv(doc);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });

  it('every example in the document matches the schema it illustrates, and no amount example is a placeholder', () => {
    const examples = examplesOf(doc, '');
    expect(examples.length).to.be.greaterThan(20);
    for (const { at, schema, value } of examples) {
      const fn = validator(schema);
      expect(fn(value), `${at}: ${JSON.stringify(fn.errors?.slice(0, 3))}`).to.equal(true);
    }
    const transactions = JSON.stringify([doc.components.schemas.OfframpTransaction, doc.components.schemas.OnrampTransaction, doc.components.schemas.Settlement]);
    expect(transactions).to.not.match(/"amount":"string"|"examples":\["string"\]/);
  });

  it('a transaction is one of an off-ramp and an on-ramp shape, told apart by direction', () => {
    const transaction = doc.components.schemas.Transaction as { oneOf: { $ref: string }[]; discriminator: { propertyName: string; mapping: Record<string, string> } };
    expect(transaction.oneOf.map((s) => s.$ref)).to.deep.equal(['#/components/schemas/OfframpTransaction', '#/components/schemas/OnrampTransaction']);
    expect(transaction.discriminator).to.deep.equal({
      propertyName: 'direction',
      mapping: { offramp: '#/components/schemas/OfframpTransaction', onramp: '#/components/schemas/OnrampTransaction' },
    });
    const offramp = doc.components.schemas.OfframpTransaction.examples![0] as Record<string, any>;
    const onramp = doc.components.schemas.OnrampTransaction.examples![0] as Record<string, any>;
    // The merged shape is gone: each side carries the asset or the currency, never both.
    expect(offramp.source).to.have.property('asset', 'USDC').and.not.have.property('currency');
    expect(onramp.source).to.have.property('currency', 'KES').and.not.have.property('asset');
    // The wrong direction's example is refused by the other shape.
    expect(validator('/components/schemas/OnrampTransaction')(offramp)).to.equal(false);
    expect(validator('/components/schemas/OfframpTransaction')(onramp)).to.equal(false);
    expect(validator('/components/schemas/Transaction')({ ...onramp, direction: 'offramp' })).to.equal(false);
  });

  it('a real off-ramp and on-ramp match their shapes and have the shape of the examples', async () => {
    const key = (await makeBusiness()).sandboxKey;
    const walletId = (await createCustomer(api, key)).wallet.id;
    await fund(api, key, walletId, '200');
    const off = await offramp(api, key, (await quote(api, key, { direction: 'offramp', source_amount: '100', beneficiary_id: await kesBeneficiary(api, key) })).id, walletId);
    expect(off.status, JSON.stringify(off.body)).to.equal(201);
    matches('OfframpTransaction', off.body);
    const on = await api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({
      quote_id: (await quote(api, key, { direction: 'onramp', destination_amount: '100', wallet_id: walletId })).id,
      payment_method: { type: 'mobile_money', phone_number: '+254712345678', mobile_network: 'safaricom' },
    });
    expect(on.status, JSON.stringify(on.body)).to.equal(201);
    matches('OnrampTransaction', on.body);

    const offDone = await untilStatus(api, key, off.body.id, ['completed']);
    const onDone = await untilStatus(api, key, on.body.id, ['completed']);
    matches('Transaction', offDone);
    matches('Transaction', onDone);
    expect(shape(offDone), 'GET an off-ramp vs its example').to.deep.equal(shape(doc.components.schemas.OfframpTransaction.examples![0] as Json));
    expect(shape(onDone), 'GET an on-ramp vs its example').to.deep.equal(shape(doc.components.schemas.OnrampTransaction.examples![0] as Json));
    expect(shape(offDone.settlement), 'the settlement vs its example').to.deep.equal(shape(doc.components.schemas.Settlement.examples![0] as Json));

    const list = (await api.http.get(`${BASE}/transactions?limit=10`).set(bearer(key))).body;
    matches('TransactionList', list);
    expect(list.data.map((t: { direction: string }) => t.direction)).to.have.members(['offramp', 'onramp']);
  });
});
