// The lifecycles a fault run drives, each as the business and its payer would: through the public API, the payer's
// own chain transfers (straight to Anvil), and M-Pesa (KES) or MTN MoMo (UGX) phones whose last four digits pick the
// stand-in's scenario (success otherwise; 0001 declined collection; 0002 receiver refused for good; on MoMo, 0009 a
// payout whose first transfer FAILED for a temporary reason). A declined collection or a refused payout ends with a
// code the seed draws from the provider's published table (Safaricom's STK and B2C codes, MTN's reasons: CONTRACT §18,
// every answer ends somewhere), not from the codes our parser knows. A lifecycle records what it created
// (transactions, intents, phones, payer addresses, the codes drawn): the invariants read the rest from the database
// and the chain.
import { randomUUID } from 'node:crypto';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { until } from '../helpers/until.js';
import { B2C_RESULT_CODES, PUBLISHED_STK_RESULT_CODES } from '../helpers/fake-daraja.js';
import { MOMO_REASONS } from '../helpers/fake-momo.js';
import { draw, type LifecycleKind } from './schedule.js';
import type { World } from './world.js';
import { SETTLEMENT_TTL_SECONDS } from './world.js';

export interface Lifecycle {
  kind: LifecycleKind;
  n: number;
  transactions: string[];
  intents: string[];
  withdrawals: string[];
  /** Payer phones (digits only) and payer chain addresses (lower case) this lifecycle used. */
  phones: string[];
  payers: string[];
  /** The published failure codes drawn for its declined collection or refused payout (printed with a failing run). */
  codes: string[];
  /** The harness could not drive it as planned (an API answer it did not expect): reported, not an invariant. */
  error?: string;
}

const minor = (v: string) => toMinor(v, USDC_SCALE);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ok(answer: { status: number; body: Record<string, any> }, what: string): Record<string, any> {
  if (answer.status >= 300) throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
  return answer.body;
}

const STK_FAILURES = Object.keys(PUBLISHED_STK_RESULT_CODES).filter((c) => c !== '0');
const B2C_FAILURES = Object.keys(B2C_RESULT_CODES).filter((c) => c !== '0');

/** A failure from a published table, fixed by the seed and the lifecycle, answered to `phone`'s next request. */
function failWith(world: World, life: Lifecycle, phone: string, what: 'stk' | 'b2c' | 'momo'): void {
  const table = what === 'stk' ? STK_FAILURES : what === 'b2c' ? B2C_FAILURES : MOMO_REASONS;
  const code = table[Math.floor(draw(world.plan.seed, `${what}:${life.n}`) * table.length)];
  const digits = phone.replace(/\D/g, '');
  life.codes.push(`${what} ${code}`);
  if (what === 'stk') world.fake.answerStk(digits, code);
  else if (what === 'b2c') world.fake.payeeResults.set(digits, [code]);
  else world.momoFake.answers.set(digits, [code]);
}

/** A Kenyan number unique to the lifecycle whose last four digits are the scenario. */
// Each run's payers are new people: a database that earlier runs left prompts in (unanswered, for the same phones
// and amounts) would otherwise make their success callbacks ambiguous, which no single run can cause.
let runPayers = 0;
export function newPayers(): void {
  runPayers = Math.floor(Math.random() * 10_000);
}
const unique = (n: number) => String((n + runPayers) % 10_000).padStart(4, '0');
/** A Kenyan (M-Pesa) or, with `momo`, an Ugandan (MTN) number. */
const phoneOf = (n: number, scenario: string, momo = false) => `${momo ? '+2567' : '+2547'}${unique(n)}${scenario}`;
/** The corridor a lifecycle runs on: KES on M-Pesa, or UGX on MTN MoMo. */
const rail = (momo: boolean) => (momo ? { currency: 'UGX', mobile_network: 'mtn' } : { currency: 'KES', mobile_network: 'safaricom' });

async function priced(world: World, key: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  let q = ok(await world.call(key, 'POST', '/quotes', { chain: 'base', currency: 'KES', payment_method: 'mobile_money', ...body }), 'quote');
  if (q.status === 'pending') {
    q = await until(async () => {
      const seen = (await world.call(key, 'GET', `/quotes/${q.id}`)).body;
      return seen.status !== 'pending' && seen;
    }, { timeoutMs: 60_000, everyMs: 250, what: `quote ${q.id} priced` });
  }
  return q;
}

async function beneficiary(world: World, key: string, phone: string, momo = false): Promise<string> {
  const { currency, mobile_network } = rail(momo);
  return ok(await world.call(key, 'POST', '/beneficiaries', {
    currency, payment_method: 'mobile_money', account_holder_name: 'Fault Payee', details: { phone_number: phone, mobile_network },
  }), 'beneficiary').id;
}

/** A fresh payer EOA registered and verified as the business's external wallet. */
async function verifiedPayer(world: World): Promise<{ key: `0x${string}`; address: string; walletId: string }> {
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  const wallet = ok(await world.call(world.liveKey, 'POST', '/wallets', { address: account.address, chain: 'base' }), 'wallet');
  const challenge = ok(await world.call(world.liveKey, 'POST', `/wallets/${wallet.id}/verification-challenges`), 'challenge');
  ok(await world.call(world.liveKey, 'POST', `/wallets/${wallet.id}/verify`, { challenge_id: challenge.id, signature: await account.signMessage({ message: challenge.message }) }), 'verify');
  return { key, address: account.address.toLowerCase(), walletId: wallet.id };
}

async function statusOf(world: World, key: string, id: string): Promise<Record<string, any>> {
  return (await world.call(key, 'GET', `/transactions/${id}`)).body;
}

async function externalOfframp(world: World, life: Lifecycle, variant: 'exact' | 'partial' | 'underpaid' | 'late' | 'refused' | 'overpaid' | 'refund_requested', momo = false): Promise<void> {
  const key = world.liveKey;
  const payer = await verifiedPayer(world);
  life.payers.push(payer.address);
  const payee = phoneOf(life.n, variant === 'refused' ? '0002' : '5678', momo);
  // Refused: the drawn code first (a temporary one is sent again, then refused for good by the 0002 scenario).
  if (variant === 'refused') failWith(world, life, payee, momo ? 'momo' : 'b2c');
  const beneficiaryId = await beneficiary(world, key, payee, momo);
  const q = await priced(world, key, { direction: 'offramp', currency: rail(momo).currency, source_amount: '20', beneficiary_id: beneficiaryId });
  const tx = ok(await world.call(key, 'POST', '/offramps', { quote_id: q.id, funding_source: { wallet_id: payer.walletId }, external_reference: `fault-${randomUUID()}` }), 'offramp');
  life.transactions.push(tx.id);
  const total = minor(tx.settlement.total_required);
  const to = tx.settlement.to_address;
  const extra = variant === 'overpaid' ? minor('5') : 0n;
  await world.mint(payer.address, total + extra);
  await world.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [payer.address, '0xde0b6b3a7640000'] as never });
  if (variant === 'partial') {
    // A tiny transfer first, the rest a few blocks later: depth counts from the last one.
    await world.transfer(payer.key, to, minor('0.5'));
    await sleep(1500);
    await world.transfer(payer.key, to, total - minor('0.5'));
  } else if (variant === 'underpaid') {
    await world.transfer(payer.key, to, total / 2n);
  } else if (variant === 'refund_requested') {
    // Underpaid at expiry: the business asks for its USDC back, to another address of its own, while faults go on
    // (the automatic return may come first: then the request is refused as having nothing left to return).
    await world.transfer(payer.key, to, total / 2n);
    await until(async () => (await statusOf(world, key, tx.id)).status === 'action_required', { timeoutMs: (SETTLEMENT_TTL_SECONDS + 60) * 1000, everyMs: 1000, what: `off-ramp ${tx.id} underpaid` });
    const asked = await world.call(key, 'POST', `/transactions/${tx.id}/refund`, { refund_address: privateKeyToAccount(generatePrivateKey()).address });
    if (asked.status !== 202 && !(asked.status === 409 && asked.body.error?.details?.reason === 'nothing_to_refund')) throw new Error(`refund request: ${asked.status} ${JSON.stringify(asked.body)}`);
  } else if (variant === 'late') {
    await until(async () => (await statusOf(world, key, tx.id)).status === 'failed', { timeoutMs: (SETTLEMENT_TTL_SECONDS + 60) * 1000, everyMs: 1000, what: `settlement of ${tx.id} expiring` });
    await world.transfer(payer.key, to, total);
  } else {
    await world.transfer(payer.key, to, total + extra);
  }
}

async function managedOfframp(world: World, life: Lifecycle, scenario: string, momo = false): Promise<void> {
  const key = world.liveKey;
  const customer = ok(await world.call(key, 'POST', '/customers', { external_reference: `fault-${randomUUID()}` }), 'customer');
  await world.mint(customer.wallet.address, minor('40'));
  // Funding from outside is credited by the watcher; the off-ramp waits for it as a business would (a short wait).
  await until(async () => {
    const b = (await world.call(key, 'GET', `/wallets/${customer.wallet.id}/balance`)).body;
    return JSON.stringify(b).includes('40.000000') || null;
  }, { timeoutMs: 20_000, everyMs: 500, what: 'the managed wallet credited' }).catch(() => null);
  const payee = phoneOf(life.n, scenario, momo);
  if (scenario === '0002') failWith(world, life, payee, momo ? 'momo' : 'b2c');
  const beneficiaryId = await beneficiary(world, key, payee, momo);
  const q = await priced(world, key, { direction: 'offramp', currency: rail(momo).currency, source_amount: '20', beneficiary_id: beneficiaryId });
  life.transactions.push(ok(await world.call(key, 'POST', '/offramps', { quote_id: q.id, funding_source: { wallet_id: customer.wallet.id } }), 'offramp').id);
}

async function onramp(world: World, life: Lifecycle, declined: boolean, momo = false): Promise<void> {
  const key = world.liveKey;
  const customer = ok(await world.call(key, 'POST', '/customers', { external_reference: `fault-${randomUUID()}` }), 'customer');
  const { currency, mobile_network } = rail(momo);
  const q = await priced(world, key, { direction: 'onramp', currency, source_amount: momo ? '15000' : '1500', wallet_id: customer.wallet.id });
  const phone = phoneOf(life.n, declined ? '0001' : '4321', momo);
  if (declined) failWith(world, life, phone, momo ? 'momo' : 'stk');
  life.phones.push(phone.replace(/\D/g, ''));
  life.transactions.push(ok(await world.call(key, 'POST', '/onramps', { quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network } }), 'onramp').id);
}

async function intent(world: World, life: Lifecycle, methods: ('mobile_money' | 'stablecoin')[], payout = false, momo = false): Promise<Record<string, any>> {
  const settlement: Record<string, unknown> = { mode: 'stablecoin', asset: 'USDC', chain: 'base' };
  if (payout) settlement.beneficiary_id = await beneficiary(world, world.liveKey, phoneOf(life.n, '5679', momo), momo);
  const amount = { currency: rail(momo).currency, value: momo ? '20000' : '1500' };
  const created = ok(await world.call(world.liveKey, 'POST', '/payment-intents', { amount, accepted_payment_methods: methods, settlement, expires_in_seconds: 600 }), 'intent');
  life.intents.push(created.id);
  return created;
}

async function collect(world: World, life: Lifecycle, intentId: string, scenario: string, momo = false): Promise<void> {
  const phone = phoneOf(life.n, scenario, momo);
  if (scenario === '0001') failWith(world, life, phone, momo ? 'momo' : 'stk');
  life.phones.push(phone.replace(/\D/g, ''));
  ok(await world.call(world.liveKey, 'POST', `/payment-intents/${intentId}/collect`, { payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: rail(momo).mobile_network } }), 'collect');
}

async function payIntentInUsdc(world: World, life: Lifecycle, created: Record<string, any>, parts: number): Promise<void> {
  const amount = minor(created.payment_instructions.amount);
  const payer = await world.payer(amount);
  life.payers.push(payer.address.toLowerCase());
  if (parts === 1) await world.transfer(payer.key, created.payment_instructions.address, amount);
  else {
    await world.transfer(payer.key, created.payment_instructions.address, amount / 3n);
    await sleep(1200);
    await world.transfer(payer.key, created.payment_instructions.address, amount - amount / 3n);
  }
}

async function sandboxOfframp(world: World, life: Lifecycle): Promise<void> {
  const key = world.sandboxKey;
  const customer = ok(await world.call(key, 'POST', '/customers', { external_reference: `fault-${randomUUID()}` }), 'customer');
  ok(await world.call(key, 'POST', `/sandbox/wallets/${customer.wallet.id}/fund`, { chain: 'base', amount: '100' }), 'fund');
  const beneficiaryId = await beneficiary(world, key, '+254722480163');
  const q = await priced(world, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
  life.transactions.push(ok(await world.call(key, 'POST', '/offramps', { quote_id: q.id, funding_source: { wallet_id: customer.wallet.id } }), 'offramp').id);
}

/** The treasury funded by an intent paid in USDC, then part of it withdrawn to a verified wallet of the business. */
async function treasuryWithdrawal(world: World, life: Lifecycle): Promise<void> {
  const created = await intent(world, life, ['stablecoin']);
  await payIntentInUsdc(world, life, created, 1);
  await until(async () => (await world.call(world.liveKey, 'GET', `/payment-intents/${created.id}`)).body.status === 'completed',
    { timeoutMs: 90_000, everyMs: 500, what: `intent ${created.id} paid into the treasury` });
  const wallet = await verifiedPayer(world);
  life.payers.push(wallet.address);
  life.withdrawals.push(ok(await world.call(world.liveKey, 'POST', '/treasury/withdrawals', { wallet_id: wallet.walletId, chain: 'base', amount: '5' }), 'withdrawal').id);
}

/** Drives one lifecycle to the point where only the service (and faults) can move it on. */
export async function drive(world: World, kind: LifecycleKind, n: number): Promise<Lifecycle> {
  const life: Lifecycle = { kind, n, transactions: [], intents: [], withdrawals: [], phones: [], payers: [], codes: [] };
  try {
    switch (kind) {
      case 'offramp_external': await externalOfframp(world, life, 'exact'); break;
      case 'offramp_external_partial': await externalOfframp(world, life, 'partial'); break;
      case 'offramp_external_underpaid': await externalOfframp(world, life, 'underpaid'); break;
      case 'offramp_external_late': await externalOfframp(world, life, 'late'); break;
      case 'offramp_external_refused': await externalOfframp(world, life, 'refused'); break;
      case 'offramp_external_overpaid': await externalOfframp(world, life, 'overpaid'); break;
      case 'offramp_external_refund_requested': await externalOfframp(world, life, 'refund_requested'); break;
      case 'offramp_managed': await managedOfframp(world, life, '5678'); break;
      case 'offramp_managed_refused': await managedOfframp(world, life, '0002'); break;
      case 'onramp': await onramp(world, life, false); break;
      case 'onramp_declined': await onramp(world, life, true); break;
      case 'intent_mpesa': await collect(world, life, (await intent(world, life, ['mobile_money'])).id, '4322'); break;
      case 'intent_mpesa_declined_then_paid': {
        const created = await intent(world, life, ['mobile_money']);
        await collect(world, life, created.id, '0001');
        // The payer tries again once the decline is known (corroborated by STK Query, later under faults).
        await until(async () => (await world.call(world.liveKey, 'GET', `/payment-intents/${created.id}`)).body.status === 'awaiting_payment',
          { what: `intent ${created.id} waiting for payment again after the decline`, timeoutMs: 90_000, everyMs: 500 });
        await collect(world, life, created.id, '4323');
        break;
      }
      case 'intent_mpesa_and_usdc': {
        // The payer pays both ways: both payments are money received, and both must be credited.
        const created = await intent(world, life, ['mobile_money', 'stablecoin']);
        await collect(world, life, created.id, '4324');
        await payIntentInUsdc(world, life, created, 1);
        break;
      }
      case 'intent_usdc': await payIntentInUsdc(world, life, await intent(world, life, ['stablecoin']), 1); break;
      case 'intent_usdc_partial': await payIntentInUsdc(world, life, await intent(world, life, ['stablecoin']), 2); break;
      case 'intent_payout': await collect(world, life, (await intent(world, life, ['mobile_money'], true)).id, '4325'); break;
      case 'sandbox_offramp': await sandboxOfframp(world, life); break;
      case 'treasury_withdrawal': await treasuryWithdrawal(world, life); break;
      // MTN MoMo (UGX): a collection paid and one the payer rejects; a payout whose first transfer FAILED for a
      // temporary reason (sent again under a new X-Reference-Id, paid once); one MTN refuses (PAYEE_NOT_FOUND: the
      // payer's USDC goes back); an intent collected by MoMo, and one paid out to an MTN number.
      case 'momo_onramp': await onramp(world, life, false, true); break;
      case 'momo_onramp_declined': await onramp(world, life, true, true); break;
      case 'momo_offramp_managed': await managedOfframp(world, life, '0009', true); break;
      case 'momo_offramp_external_refused': await externalOfframp(world, life, 'refused', true); break;
      case 'momo_intent': await collect(world, life, (await intent(world, life, ['mobile_money'], false, true)).id, '4322', true); break;
      case 'momo_intent_payout': await collect(world, life, (await intent(world, life, ['mobile_money'], true, true)).id, '4325', true); break;
    }
  } catch (err) {
    life.error = err instanceof Error ? err.message : String(err);
  }
  return life;
}
