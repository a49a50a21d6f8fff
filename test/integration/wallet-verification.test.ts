import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { PrivateKeyAccount } from 'viem/accounts';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer, externalWallet, newAccount } from '../helpers/wallets.js';
import { deadRpcUrl, deployContractWallet, startAnvil, type Anvil } from '../helpers/chain.js';

interface Challenge {
  id: string;
  wallet_id: string;
  message: string;
  expires_at: string;
}

describe('wallet ownership verification (EOA)', function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    // A wrong signature is only refused once the chain says the address holds no contract (EIP-1271), so base is
    // served by a local node; the tests' default RPC is unreachable.
    anvil = await startAnvil({ chainId: 8453 });
    api = await startApi({ env: { RPC_URL_BASE: anvil.rpcUrl } });
    biz = await makeBusiness();
  });
  after(async () => {
    await api?.close();
    await anvil?.stop();
  });

  const challenge = (key: string, walletId: string) => api.http.post(`${BASE}/wallets/${walletId}/verification-challenges`).set(writeHeaders(key));
  const verify = (key: string, walletId: string, body: object) => api.http.post(`${BASE}/wallets/${walletId}/verify`).set(writeHeaders(key)).send(body);

  async function challenged(chain = 'base'): Promise<{ account: PrivateKeyAccount; walletId: string; challenge: Challenge }> {
    const { account, wallet } = await externalWallet(api, biz.sandboxKey, chain);
    const res = await challenge(biz.sandboxKey, wallet.id);
    expect(res.status).to.equal(201);
    return { account, walletId: wallet.id, challenge: res.body };
  }

  it('issues an EIP-4361 message with the address, chain id, a nonce and a 10-minute expiry', async () => {
    const { account, walletId, challenge: c } = await challenged('polygon');
    expect(c.wallet_id).to.equal(walletId);
    expect(c.message).to.match(/ wants you to sign in with your Ethereum account:\n/);
    expect(c.message).to.contain(`\n${account.address}\n`);
    expect(c.message).to.contain('\nChain ID: 137\n');
    expect(c.message).to.match(/\nNonce: [0-9a-f]{32}\n/);
    expect(c.message).to.contain(`\nExpiration Time: ${c.expires_at}`);
    expect(c.message).to.contain(`\nRequest ID: ${c.id}`);
    expect(Date.parse(c.expires_at) - Date.now()).to.be.within(9 * 60_000, 10 * 60_000 + 1000);
    const second = (await challenge(biz.sandboxKey, walletId)).body as Challenge;
    expect(second.message.match(/Nonce: (\w+)/)![1]).not.to.equal(c.message.match(/Nonce: (\w+)/)![1]);
  });

  it('verifies a valid signature once, sets verified_at and records a wallet.verified event', async () => {
    const { account, walletId, challenge: c } = await challenged();
    const signature = await account.signMessage({ message: c.message });
    const res = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ id: walletId, ownership_status: 'verified' });
    expect(Date.parse(res.body.verified_at)).to.be.closeTo(Date.now(), 60_000);
    const events = await (await getDs()).query(`SELECT business_id, environment, data FROM events WHERE type = 'wallet.verified' AND data->>'id' = $1`, [walletId]);
    expect(events).to.have.length(1);
    expect(events[0]).to.deep.include({ business_id: biz.businessId, environment: 'sandbox' });
    expect(events[0].data).to.deep.equal(res.body);

    const reused = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature });
    expect(reused.status).to.equal(409);
    expect(reused.body.error.code).to.equal('invalid_state');
    expect((await api.http.get(`${BASE}/wallets/${walletId}`).set(bearer(biz.sandboxKey))).body.ownership_status).to.equal('verified');
  });

  it('proves ownership once: a verified wallet refuses new challenges and outstanding ones (409 invalid_state)', async () => {
    const { account, walletId, challenge: first } = await challenged();
    const second = (await challenge(biz.sandboxKey, walletId)).body;
    const verified = await verify(biz.sandboxKey, walletId, { challenge_id: first.id, signature: await account.signMessage({ message: first.message }) });
    expect(verified.status).to.equal(200);
    const late = await verify(biz.sandboxKey, walletId, { challenge_id: second.id, signature: await account.signMessage({ message: second.message }) });
    expect(late.status, late.text).to.equal(409);
    expect(late.body.error).to.deep.include({ code: 'invalid_state' });
    expect(late.body.error.details).to.deep.equal({ wallet_id: walletId, verified_at: verified.body.verified_at });
    const again = await challenge(biz.sandboxKey, walletId);
    expect(again.status).to.equal(409);
    expect(again.body.error.code).to.equal('invalid_state');
    const wallet = (await api.http.get(`${BASE}/wallets/${walletId}`).set(bearer(biz.sandboxKey))).body;
    expect(wallet.verified_at).to.equal(verified.body.verified_at);
    const events = await (await getDs()).query(`SELECT count(*)::int AS n FROM events WHERE type = 'wallet.verified' AND data->>'id' = $1`, [walletId]);
    expect(events[0].n).to.equal(1);
  });

  it('refuses a signature by another key (422 invalid_signature) and leaves the challenge usable', async () => {
    const { account, walletId, challenge: c } = await challenged();
    const wrong = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: await newAccount().signMessage({ message: c.message }) });
    expect(wrong.status).to.equal(422);
    expect(wrong.body.error.code).to.equal('invalid_signature');
    const otherMessage = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: await account.signMessage({ message: `${c.message} ` }) });
    expect(otherMessage.status).to.equal(422);
    const garbage = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: `0x${'ab'.repeat(65)}` });
    expect(garbage.status).to.equal(422);
    expect((await api.http.get(`${BASE}/wallets/${walletId}`).set(bearer(biz.sandboxKey))).body.ownership_status).to.equal('unverified');
    const right = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: await account.signMessage({ message: c.message }) });
    expect(right.status).to.equal(200);
  });

  it('refuses an expired challenge with 422 challenge_expired', async () => {
    const { account, walletId, challenge: c } = await challenged();
    await (await getDs()).query(`UPDATE wallet_challenges SET expires_at = now() - interval '1 second' WHERE id = $1`, [c.id]);
    const res = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: await account.signMessage({ message: c.message }) });
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal('challenge_expired');
  });

  it('lets one of several concurrent verifications of one challenge win', async () => {
    const { account, walletId, challenge: c } = await challenged();
    const signature = await account.signMessage({ message: c.message });
    const results = await Promise.all(Array.from({ length: 6 }, () => verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature })));
    expect(results.filter((r) => r.status === 200)).to.have.length(1);
    expect(results.filter((r) => r.status === 409)).to.have.length(5);
    const events = await (await getDs()).query(`SELECT count(*)::int AS n FROM events WHERE type = 'wallet.verified' AND data->>'id' = $1`, [walletId]);
    expect(events[0].n).to.equal(1);
  });

  it('refuses managed wallets (409 invalid_state) and archived wallets (409 resource_archived)', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    const managed = await challenge(biz.sandboxKey, customer.wallet.id);
    expect(managed.status).to.equal(409);
    expect(managed.body.error.code).to.equal('invalid_state');
    expect((await verify(biz.sandboxKey, customer.wallet.id, { challenge_id: randomUUID(), signature: '0x00' })).status).to.equal(409);

    const { account, walletId, challenge: c } = await challenged();
    await api.http.delete(`${BASE}/wallets/${walletId}`).set(writeHeaders(biz.sandboxKey));
    expect((await challenge(biz.sandboxKey, walletId)).body.error.code).to.equal('resource_archived');
    const res = await verify(biz.sandboxKey, walletId, { challenge_id: c.id, signature: await account.signMessage({ message: c.message }) });
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('resource_archived');
  });

  it('answers 404 for a challenge of another wallet or an unknown one', async () => {
    const a = await challenged();
    const b = await challenged();
    const crossed = await verify(biz.sandboxKey, b.walletId, { challenge_id: a.challenge.id, signature: await b.account.signMessage({ message: a.challenge.message }) });
    expect(crossed.status).to.equal(404);
    expect((await verify(biz.sandboxKey, a.walletId, { challenge_id: randomUUID(), signature: '0x00' })).status).to.equal(404);
  });

  it('rejects malformed requests with 400', async () => {
    const { walletId, challenge: c } = await challenged();
    for (const body of [{}, { challenge_id: c.id }, { challenge_id: c.id, signature: 'nothex' }, { challenge_id: c.id, signature: '0xabc' }, { challenge_id: 'x', signature: '0x00' }, { challenge_id: c.id, signature: '0x00', extra: 1 }]) {
      const res = await verify(biz.sandboxKey, walletId, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }
    const withBody = await api.http.post(`${BASE}/wallets/${walletId}/verification-challenges`).set(writeHeaders(biz.sandboxKey)).send({ a: 1 });
    expect(withBody.status).to.equal(400);
  });

  it('keeps other businesses and the other environment out (404)', async () => {
    const { account, walletId, challenge: c } = await challenged();
    const signature = await account.signMessage({ message: c.message });
    for (const key of [biz.liveKey, (await makeBusiness()).sandboxKey]) {
      expect((await challenge(key, walletId)).status).to.equal(404);
      expect((await verify(key, walletId, { challenge_id: c.id, signature })).status).to.equal(404);
    }
    expect((await api.http.get(`${BASE}/wallets/${walletId}`).set(bearer(biz.sandboxKey))).body.ownership_status).to.equal('unverified');
  });

  it('needs wallets:write', async () => {
    const { walletId, challenge: c } = await challenged();
    const key = await makeKey(biz.businessId, { scopes: ['wallets:read'] });
    const created = await challenge(key.key, walletId);
    expect(created.status).to.equal(403);
    expect(created.body.error.details).to.deep.equal({ required_scope: 'wallets:write' });
    expect((await verify(key.key, walletId, { challenge_id: c.id, signature: '0x00' })).status).to.equal(403);
  });
});

describe('wallet ownership verification (EIP-1271 contract wallets, against Anvil)', function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    anvil = await startAnvil({ chainId: 8453 });
    api = await startApi({ env: { RPC_URL_BASE: anvil.rpcUrl } });
    biz = await makeBusiness();
  });
  after(async () => {
    await api?.close();
    await anvil?.stop();
  });

  /** A deployed contract wallet owned by a fresh key, registered and challenged through `harness`. */
  async function contractWalletChallenge(harness: ApiHarness, key: string) {
    const owner = newAccount();
    const address = await deployContractWallet(anvil, owner.address);
    const registered = await harness.http.post(`${BASE}/wallets`).set(writeHeaders(key)).send({ address, chain: 'base' });
    expect(registered.status).to.equal(201);
    const c = await harness.http.post(`${BASE}/wallets/${registered.body.id}/verification-challenges`).set(writeHeaders(key));
    expect(c.body.message).to.contain('Chain ID: 8453');
    return { owner, walletId: registered.body.id as string, challenge: c.body as Challenge };
  }
  const verifyOn = (harness: ApiHarness, key: string, walletId: string, body: object) =>
    harness.http.post(`${BASE}/wallets/${walletId}/verify`).set(writeHeaders(key)).send(body);

  it('accepts the owner\'s signature through isValidSignature', async () => {
    const { owner, walletId, challenge: c } = await contractWalletChallenge(api, biz.sandboxKey);
    const res = await verifyOn(api, biz.sandboxKey, walletId, { challenge_id: c.id, signature: await owner.signMessage({ message: c.message }) });
    expect(res.status).to.equal(200);
    expect(res.body.ownership_status).to.equal('verified');
  });

  it('refuses a signature the contract rejects (422 invalid_signature)', async () => {
    const { walletId, challenge: c } = await contractWalletChallenge(api, biz.sandboxKey);
    const res = await verifyOn(api, biz.sandboxKey, walletId, { challenge_id: c.id, signature: await newAccount().signMessage({ message: c.message }) });
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal('invalid_signature');
  });

  it('answers 503 with Retry-After when the chain cannot be reached, and leaves the challenge usable', async () => {
    // No RPC_URL_BASE of its own: the test run's default, on which nothing listens.
    const unreachable = await startApi();
    try {
      const { owner, walletId, challenge: c } = await contractWalletChallenge(unreachable, biz.liveKey);
      const signature = await owner.signMessage({ message: c.message });
      const res = await verifyOn(unreachable, biz.liveKey, walletId, { challenge_id: c.id, signature });
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
      expect(Number(res.headers['retry-after'])).to.be.greaterThan(0);
      expect(JSON.stringify(res.body)).not.to.match(/127\.0\.0\.1|ECONNREFUSED/);
      const later = await verifyOn(api, biz.liveKey, walletId, { challenge_id: c.id, signature });
      expect(later.status).to.equal(200);
      expect(later.body.ownership_status).to.equal('verified');
    } finally {
      await unreachable.close();
    }
  });

  it('answers 503 when the RPC is down for a contract wallet, yet still verifies EOAs locally', async () => {
    const down = await startApi({ env: { RPC_URL_BASE: await deadRpcUrl() } });
    try {
      const business = await makeBusiness();
      const { owner, walletId, challenge: c } = await contractWalletChallenge(down, business.sandboxKey);
      const res = await verifyOn(down, business.sandboxKey, walletId, { challenge_id: c.id, signature: await owner.signMessage({ message: c.message }) });
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
      expect(res.headers['retry-after']).to.match(/^\d+$/);

      const { account, wallet } = await externalWallet(down, business.sandboxKey);
      const eoa = (await down.http.post(`${BASE}/wallets/${wallet.id}/verification-challenges`).set(writeHeaders(business.sandboxKey))).body as Challenge;
      const ok = await verifyOn(down, business.sandboxKey, wallet.id, { challenge_id: eoa.id, signature: await account.signMessage({ message: eoa.message }) });
      expect(ok.status).to.equal(200);
    } finally {
      await down.close();
    }
  });
});

describe('wallet ownership verification without an RPC for the chain', () => {
  let api: ApiHarness;
  before(async () => {
    // No RPC_URL_POLYGON: EIP-1271 is not consulted (no public RPC is ever called for it), EIP-191 decides.
    api = await startApi({ env: { RPC_URL_POLYGON: '' } });
  });
  after(() => api.close());

  it('a wrong signer is 422 invalid_signature at once; the right one verifies', async () => {
    const biz = await makeBusiness();
    const { account, wallet } = await externalWallet(api, biz.sandboxKey, 'polygon');
    const created = await api.http.post(`${BASE}/wallets/${wallet.id}/verification-challenges`).set(writeHeaders(biz.sandboxKey));
    expect(created.status).to.equal(201);
    const wrong = await newAccount().signMessage({ message: created.body.message });
    const refused = await api.http.post(`${BASE}/wallets/${wallet.id}/verify`).set(writeHeaders(biz.sandboxKey)).send({ challenge_id: created.body.id, signature: wrong });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(422);
    expect(refused.body.error.code).to.equal('invalid_signature');
    const right = await account.signMessage({ message: created.body.message });
    const ok = await api.http.post(`${BASE}/wallets/${wallet.id}/verify`).set(writeHeaders(biz.sandboxKey)).send({ challenge_id: created.body.id, signature: right });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body.ownership_status).to.equal('verified');
  });
});
