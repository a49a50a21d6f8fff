// The one corridor registry: which (currency, payment method) pairs we pay out to, what a beneficiary's
// `details` must hold for each, the amount limits per transaction and the provider that serves it.
// Beneficiaries, quotes and payouts read it; nothing else hard-codes a corridor.
import { AppError } from '../errors.js';

export const PAYMENT_METHODS = ['mobile_money', 'bank_transfer', 'paybill', 'buy_goods', 'email_transfer', 'swift_transfer'] as const;
export type PaymentMethod = (typeof PAYMENT_METHODS)[number];

/**
 * Live provider ids. mpesa_daraja serves its corridors; mtn_momo serves a `mobile_money_partner` corridor on the `mtn`
 * network when its currency is in MOMO_CURRENCIES (shared/providers/live-rails.ts); the others name a partner slot.
 */
export type ProviderId = 'mpesa_daraja' | 'mtn_momo' | 'mobile_money_partner' | 'local_bank_partner' | 'interac_partner' | 'swift_partner';
export type Direction = 'offramp' | 'onramp';

/** A percentage fee with a floor: `bps` basis points of the amount, at least `min`. */
export interface FeeSchedule {
  bps: number;
  /** Decimal string; for a corridor's provider fee, in the corridor's currency at its scale. */
  min: string;
}

export interface CorridorField {
  name: string;
  type: 'string';
  required: boolean;
  description: string;
  pattern?: string;
  enum?: readonly string[];
  min_length?: number;
  max_length?: number;
  /** Redacted to its last 4 characters in every response; never logged. */
  sensitive: boolean;
}

export interface Corridor {
  currency: string;
  payment_method: PaymentMethod;
  provider: ProviderId;
  /** offramp: we pay out to this destination; onramp: we can also collect from it. */
  directions: readonly Direction[];
  /** Per transaction, decimal strings at the currency's scale, in the currency. */
  min_amount: string;
  max_amount: string;
  /** What the payout partner charges us per transaction, passed on in the quote's `fees.provider`. */
  provider_fee: FeeSchedule;
  fields: readonly CorridorField[];
  /** Groups of fields of which at least one must be given (e.g. iban or account_number). */
  one_of?: readonly (readonly string[])[];
  /** The JSON Schema `details` must satisfy; served as-is by GET /beneficiaries/requirements. */
  schema: Record<string, unknown>;
}

type CorridorDef = Omit<Corridor, 'schema'>;

function field(name: string, description: string, extra: Partial<Omit<CorridorField, 'name' | 'description' | 'type'>> = {}): CorridorField {
  return { name, type: 'string', required: true, description, sensitive: false, ...extra };
}

const optional = (f: CorridorField): CorridorField => ({ ...f, required: false });

function phone(countryCode: string, national: string, example: string): CorridorField {
  return field('phone_number', `Mobile money number in E.164 form with the +${countryCode} country code, e.g. ${example}.`, {
    pattern: `^\\+${countryCode}${national}$`,
    sensitive: true,
  });
}

const network = (...networks: string[]) => field('mobile_network', 'Mobile money network of the number.', { enum: networks });

function bankCode(description: string, pattern: string): CorridorField {
  return field('bank_code', description, { pattern });
}

function accountNumber(description: string, pattern: string): CorridorField {
  return field('account_number', description, { pattern, sensitive: true });
}

const bankName = field('bank_name', 'Name of the receiving bank.', { min_length: 1, max_length: 140 });
const iso3166 = '^[A-Z]{2}$';

const SWIFT_FIELDS: CorridorField[] = [
  field('swift_bic', 'SWIFT/BIC of the receiving bank: 8 or 11 characters, upper case.', { pattern: '^[A-Z]{4}[A-Z]{2}[A-Z0-9]{2}([A-Z0-9]{3})?$' }),
  optional(field('iban', 'IBAN, upper case without spaces. Either iban or account_number is required.', { pattern: '^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$', sensitive: true })),
  optional(accountNumber('Account number, where the country has no IBAN. Either iban or account_number is required.', '^[A-Za-z0-9]{4,34}$')),
  bankName,
  field('bank_country', 'ISO 3166-1 alpha-2 country of the receiving bank.', { pattern: iso3166 }),
  field('address_line1', 'Beneficiary street address.', { min_length: 1, max_length: 140 }),
  optional(field('address_line2', 'Beneficiary address, second line.', { min_length: 1, max_length: 140 })),
  field('address_city', 'Beneficiary city.', { min_length: 1, max_length: 100 }),
  optional(field('address_postal_code', 'Beneficiary postal code.', { pattern: '^[A-Za-z0-9][A-Za-z0-9 -]{0,15}$' })),
  field('address_country', 'ISO 3166-1 alpha-2 country of the beneficiary\'s address.', { pattern: iso3166 }),
];

const fee = (bps: number, min: string): FeeSchedule => Object.freeze({ bps, min });

function swift(currency: string): CorridorDef {
  return {
    currency, payment_method: 'swift_transfer', provider: 'swift_partner', directions: ['offramp'],
    // Correspondent banks charge a flat amount that dominates small wires: 0.1%, at least 25 units.
    min_amount: '100.00', max_amount: '1000000.00', provider_fee: fee(10, '25.00'), fields: SWIFT_FIELDS, one_of: [['iban', 'account_number']],
  };
}

function mobileMoney(currency: string, provider: ProviderId, limits: [string, string], providerFee: FeeSchedule, fields: CorridorField[], directions: Direction[] = ['offramp']): CorridorDef {
  return { currency, payment_method: 'mobile_money', provider, directions, min_amount: limits[0], max_amount: limits[1], provider_fee: providerFee, fields };
}

const CORRIDOR_DEFS: CorridorDef[] = [
  // Provider fees are our partners' rate cards (placeholders until contracts are signed), not consumer tariffs.
  mobileMoney('KES', 'mpesa_daraja', ['10.00', '250000.00'], fee(100, '10.00'), [phone('254', '(7|1)[0-9]{8}', '+254712345678'), network('safaricom', 'airtel')], ['offramp', 'onramp']),
  {
    currency: 'KES', payment_method: 'paybill', provider: 'mpesa_daraja', directions: ['offramp'], min_amount: '10.00', max_amount: '250000.00',
    provider_fee: fee(100, '15.00'),
    fields: [
      field('paybill_number', 'M-Pesa PayBill business number, 5 to 7 digits.', { pattern: '^[0-9]{5,7}$' }),
      field('account_number', 'Account reference at the PayBill, 1 to 13 letters, digits or dashes.', { pattern: '^[A-Za-z0-9-]{1,13}$', sensitive: true }),
    ],
  },
  {
    currency: 'KES', payment_method: 'buy_goods', provider: 'mpesa_daraja', directions: ['offramp'], min_amount: '10.00', max_amount: '250000.00',
    provider_fee: fee(50, '10.00'),
    fields: [field('till_number', 'M-Pesa Buy Goods till number, 5 to 7 digits.', { pattern: '^[0-9]{5,7}$' })],
  },
  {
    currency: 'KES', payment_method: 'bank_transfer', provider: 'local_bank_partner', directions: ['offramp'], min_amount: '100.00', max_amount: '10000000.00',
    provider_fee: fee(25, '100.00'),
    fields: [
      bankCode('Two-digit Central Bank of Kenya bank code.', '^[0-9]{2}$'),
      optional(field('branch_code', 'Three-digit branch code.', { pattern: '^[0-9]{3}$' })),
      accountNumber('Bank account number, 6 to 20 digits.', '^[0-9]{6,20}$'),
    ],
  },
  // UGX, RWF and GHS collect too where MTN MoMo serves them live (MOMO_CURRENCIES), and in sandbox.
  mobileMoney('UGX', 'mobile_money_partner', ['500', '5000000'], fee(150, '500'), [phone('256', '7[0-9]{8}', '+256772123456'), network('mtn', 'airtel')], ['offramp', 'onramp']),
  mobileMoney('TZS', 'mobile_money_partner', ['1000.00', '5000000.00'], fee(150, '1000.00'), [phone('255', '[67][0-9]{8}', '+255712345678'), network('mtn', 'airtel', 'vodacom')]),
  mobileMoney('RWF', 'mobile_money_partner', ['100', '2000000'], fee(150, '100'), [phone('250', '7[0-9]{8}', '+250781234567'), network('mtn', 'airtel')], ['offramp', 'onramp']),
  mobileMoney('GHS', 'mobile_money_partner', ['1.00', '10000.00'], fee(100, '0.50'), [phone('233', '[235][0-9]{8}', '+233241234567'), network('mtn', 'vodafone', 'airteltigo')], ['offramp', 'onramp']),
  {
    currency: 'GHS', payment_method: 'bank_transfer', provider: 'local_bank_partner', directions: ['offramp'], min_amount: '10.00', max_amount: '1000000.00',
    provider_fee: fee(50, '5.00'),
    fields: [bankCode('Six-digit Ghana bank sort code.', '^[0-9]{6}$'), accountNumber('Bank account number, 8 to 16 digits.', '^[0-9]{8,16}$')],
  },
  {
    currency: 'NGN', payment_method: 'bank_transfer', provider: 'local_bank_partner', directions: ['offramp'], min_amount: '100.00', max_amount: '10000000.00',
    provider_fee: fee(50, '100.00'),
    fields: [bankCode('CBN bank code, 3 to 6 digits.', '^[0-9]{3,6}$'), accountNumber('10-digit NUBAN account number.', '^[0-9]{10}$')],
  },
  {
    currency: 'ZAR', payment_method: 'bank_transfer', provider: 'local_bank_partner', directions: ['offramp'], min_amount: '10.00', max_amount: '1000000.00',
    provider_fee: fee(50, '10.00'),
    fields: [
      bankCode('Six-digit universal branch code of the bank.', '^[0-9]{6}$'),
      accountNumber('Bank account number, 6 to 16 digits.', '^[0-9]{6,16}$'),
      optional(field('account_type', 'Account type.', { enum: ['cheque', 'savings', 'transmission'] })),
    ],
  },
  {
    currency: 'CAD', payment_method: 'email_transfer', provider: 'interac_partner', directions: ['offramp'], min_amount: '1.00', max_amount: '3000.00',
    provider_fee: fee(100, '1.00'),
    fields: [field('email', 'Interac e-Transfer recipient email address.', { pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$', max_length: 254, sensitive: true })],
  },
  swift('USD'),
  swift('EUR'),
  swift('GBP'),
];

/** JSON Schema of `details`, derived from the fields so the two never disagree. */
function detailsSchema(def: CorridorDef): Record<string, unknown> {
  const properties = Object.fromEntries(def.fields.map((f) => [f.name, {
    type: 'string',
    description: f.description,
    ...(f.pattern ? { pattern: f.pattern } : {}),
    ...(f.enum ? { enum: [...f.enum] } : {}),
    ...(f.min_length !== undefined ? { minLength: f.min_length } : {}),
    ...(f.max_length !== undefined ? { maxLength: f.max_length } : {}),
  }]));
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    additionalProperties: false,
    required: def.fields.filter((f) => f.required).map((f) => f.name),
    properties,
    ...(def.one_of ? { allOf: def.one_of.map((group) => ({ anyOf: group.map((name) => ({ required: [name] })) })) } : {}),
  };
}

const key = (currency: string, method: string) => `${currency}:${method}`;

const REGISTRY: ReadonlyMap<string, Corridor> = new Map(
  CORRIDOR_DEFS.map((def) => [key(def.currency, def.payment_method), Object.freeze({ ...def, schema: detailsSchema(def) })]),
);

export function listCorridors(): readonly Corridor[] {
  return [...REGISTRY.values()];
}

export function getCorridor(currency: string, paymentMethod: string): Corridor | undefined {
  return REGISTRY.get(key(currency, paymentMethod));
}

export function paymentMethodsFor(currency: string, direction?: Direction): PaymentMethod[] {
  return listCorridors().filter((c) => c.currency === currency && (!direction || c.directions.includes(direction))).map((c) => c.payment_method);
}

/** Where every 4xx about a corridor sends the caller: the list of what is served. */
export const CORRIDORS_POINTER = 'GET /corridors lists every currency, payment method and direction we serve.';

/** A 4xx about a corridor (a pair, a direction, a live rail, a limit): its message ends by naming GET /corridors. */
export function corridorError(code: 'unsupported_corridor' | 'amount_out_of_range', message: string, details?: unknown): AppError {
  return new AppError(code, `${message} ${CORRIDORS_POINTER}`, details);
}

const VERB: Record<Direction, { does: string; done: string; ramp: string }> = {
  offramp: { does: 'pay out', done: 'paid out', ramp: 'off-ramps' },
  onramp: { does: 'collect', done: 'collected', ramp: 'on-ramps' },
};

const orList = (items: readonly string[]) => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`);

/**
 * The corridor, or 422 unsupported_corridor saying what the currency does support in the direction asked (`direction`
 * omitted: in either), with those methods in `details.supported_payment_methods`.
 */
export function requireCorridor(currency: string, paymentMethod: string, direction?: Direction): Corridor {
  const corridor = getCorridor(currency, paymentMethod);
  if (corridor && (!direction || corridor.directions.includes(direction))) return corridor;
  const served = paymentMethodsFor(currency);
  if (!served.length) throw corridorError('unsupported_corridor', `We do not serve ${currency}.`, { currency, payment_method: paymentMethod, supported_payment_methods: [] });
  const methods = paymentMethodsFor(currency, direction);
  const details = {
    currency, payment_method: paymentMethod, ...(direction ? { direction } : {}), supported_payment_methods: methods,
    ...(corridor ? { reason: 'direction_not_supported', supported_directions: [...corridor.directions] } : {}),
  };
  if (!direction) throw corridorError('unsupported_corridor', `We do not serve ${currency} by ${paymentMethod}; ${currency} goes by ${orList(served)}.`, details);
  const verb = VERB[direction];
  const other = VERB[direction === 'onramp' ? 'offramp' : 'onramp'];
  const available = methods.length
    ? `${currency} is ${verb.done} by ${orList(methods)}.`
    : `${currency} is ${other.done} only (${other.ramp}, by ${orList(paymentMethodsFor(currency, direction === 'onramp' ? 'offramp' : 'onramp'))}); no ${verb.ramp} run in it.`;
  throw corridorError('unsupported_corridor', `We do not ${verb.does} ${currency} by ${paymentMethod}: ${available}`, details);
}
