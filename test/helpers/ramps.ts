import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { ApiHarness } from './harness.js';
import { bearer, writeHeaders } from './factories.js';
import { BASE, externalWallet } from './wallets.js';
import { getDs } from './shared.js';
import { findLedgerInconsistencies, postEntry } from '../../shared/domain/ledger.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { responseAjv } from '../fuzz/operations.js';
import { until } from './until.js';

/** A KES M-Pesa beneficiary; `phone` decides the sandbox payout (0002 rejected, 0003 temporary). */
export async function kesBeneficiary(api: ApiHarness, key: string, phone = '+254722480163'): Promise<string> {
  const res = await api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(key)).send({
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Amina W', details: { phone_number: phone, mobile_network: 'safaricom' },
  });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.id;
}

/** A registered external wallet whose ownership is proven (EIP-191 signature over the challenge), with its key's account. */
export async function verifiedWallet(api: ApiHarness, key: string, chain = 'base'): Promise<{ id: string; address: string; account: PrivateKeyAccount }> {
  const { account, wallet } = await externalWallet(api, key, chain);
  const challenge = await api.http.post(`${BASE}/wallets/${wallet.id}/verification-challenges`).set(writeHeaders(key));
  const verified = await api.http.post(`${BASE}/wallets/${wallet.id}/verify`).set(writeHeaders(key)).send({
    challenge_id: challenge.body.id, signature: await account.signMessage({ message: challenge.body.message }),
  });
  expect(verified.status, JSON.stringify(verified.body)).to.equal(200);
  return { ...wallet, account };
}

export async function fund(api: ApiHarness, key: string, walletId: string, amount: string, chain = 'base'): Promise<void> {
  const res = await api.http.post(`${BASE}/sandbox/wallets/${walletId}/fund`).set(writeHeaders(key)).send({ chain, amount });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
}

export async function balance(api: ApiHarness, key: string, walletId: string, chain = 'base'): Promise<string> {
  return (await api.http.get(`${BASE}/wallets/${walletId}/balance?chain=${chain}`).set(bearer(key))).body.available;
}

/**
 * A priced quote. Priced within the POST's wait it is the 201's body; a loaded machine's pricing pool may answer later
 * (202 pending, as the API documents), and then the quote is read until it is priced.
 */
export async function quote(api: ApiHarness, key: string, body: Record<string, unknown>): Promise<{ id: string } & Record<string, any>> {
  const res = await api.http.post(`${BASE}/quotes`).set(writeHeaders(key)).send({ chain: 'base', currency: 'KES', payment_method: 'mobile_money', ...body });
  if (res.status !== 202) {
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body;
  }
  const priced = await until(async () => {
    const got = (await api.http.get(`${BASE}/quotes/${res.body.id}`).set(bearer(key))).body;
    return got.status !== 'pending' && got;
  }, { what: `quote ${res.body.id} priced` });
  expect(priced.status, JSON.stringify(priced)).to.equal('available');
  return priced;
}

export async function offramp(api: ApiHarness, key: string, quoteId: string, walletId: string) {
  return api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: quoteId, funding_source: { wallet_id: walletId }, external_reference: `ext-${randomUUID()}` });
}

/** Polls GET /transactions/{id} until its status is one of `statuses` (10 s at most). */
export async function untilStatus(api: ApiHarness, key: string, id: string, statuses: string[]): Promise<Record<string, any>> {
  let last: Record<string, any> = {};
  return until(
    async () => {
      last = (await api.http.get(`${BASE}/transactions/${id}`).set(bearer(key))).body;
      return statuses.includes(last.status) && last;
    },
    { what: `transaction ${id} reaching ${statuses.join('/')}`, describe: () => ({ status: last.status, failure: last.failure }) },
  );
}

/** The statuses a resource went through, in order, from its history. */
export async function history(id: string): Promise<string[]> {
  const rows: { to_status: string }[] = await (await getDs()).query(`SELECT to_status FROM status_history WHERE resource_id = $1 ORDER BY id`, [id]);
  return rows.map((r) => r.to_status);
}

/** Every entry balances and every stored balance equals its postings. */
export async function expectLedgerSound(): Promise<void> {
  const found = await findLedgerInconsistencies(await getDs());
  expect(found.unbalancedEntries, 'unbalanced entries').to.deep.equal([]);
  expect(found.driftedAccounts, 'drifted balances').to.deep.equal([]);
}

/** Checks a body against a component schema of the document the service serves (`validate('PayoutBatch', body)`). */
export async function schemaValidator(api: ApiHarness): Promise<(name: string, body: unknown) => void> {
  const ajv = responseAjv((await api.http.get('/openapi.json')).body);
  return (name, body) => {
    const fn = ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` });
    if (!fn(body)) expect.fail(`${name}: ${JSON.stringify(fn.errors)}`);
  };
}

/** Credits a sandbox business's treasury as a confirmed deposit would (inbound clearing -> treasury). */
export function fundTreasury(api: ApiHarness, businessId: string, amount: string): Promise<unknown> {
  const minor = toMinor(amount, USDC_SCALE);
  return inUnit(api.deps, (unit) => postEntry(unit.em, { businessId, environment: 'sandbox' }, {
    kind: 'test_treasury_funding',
    postings: [{ account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -minor }, { account: { kind: 'treasury', asset: 'USDC' }, amount: minor }],
  }));
}
