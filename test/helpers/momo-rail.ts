// Live UGX ramps on the MTN MoMo stand-in (test/helpers/fake-momo.ts): the payer's or payee's last four digits pick
// what MTN does. The rail is the live rail of live-rail.ts started with `momo` (MOMO_CURRENCIES=UGX).
import { expect } from 'chai';
import { writeHeaders } from './factories.js';
import { BASE } from './wallets.js';
import { quote } from './ramps.js';
import { fundedLiveWallet, type LiveRail } from './live-rail.js';

/** +256 77 234 xxxx: an Ugandan MTN number ending in `suffix`. */
export const ugPhone = (suffix: string) => `+25677234${suffix}`;

export async function momoBeneficiary(rail: LiveRail, phone: string, network = 'mtn'): Promise<string> {
  const res = await rail.api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(rail.key)).send({
    currency: 'UGX', payment_method: 'mobile_money', account_holder_name: 'Okello J', details: { phone_number: phone, mobile_network: network },
  });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.id;
}

/** A live UGX on-ramp of 15000 UGX paid by `phone` on MTN. */
export async function momoOnramp(rail: LiveRail, phone: string, walletId?: string): Promise<string> {
  const wallet = walletId ?? (await fundedLiveWallet(rail, '0'));
  const q = await quote(rail.api, rail.key, { direction: 'onramp', currency: 'UGX', source_amount: '15000', wallet_id: wallet });
  const res = await rail.api.http.post(`${BASE}/onramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'mtn' } });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.id;
}

/** A live UGX off-ramp of 20 USDC from a managed wallet holding 100, to a new MTN beneficiary. */
export async function momoPayout(rail: LiveRail, phone: string): Promise<{ id: string; walletId: string }> {
  const walletId = await fundedLiveWallet(rail, '100');
  const beneficiaryId = await momoBeneficiary(rail, phone);
  const q = await quote(rail.api, rail.key, { direction: 'offramp', currency: 'UGX', source_amount: '20', beneficiary_id: beneficiaryId });
  const res = await rail.api.http.post(`${BASE}/offramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, funding_source: { wallet_id: walletId } });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.id, walletId };
}
