// Checking and redacting a beneficiary's `details` against its corridor. Messages never repeat a value.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { AppError } from '../errors.js';
import type { Corridor, CorridorField } from './corridors.js';

export type Details = Record<string, string>;

export interface DetailIssue {
  path: string;
  message: string;
}

// strictRequired off: the "one of" groups name properties declared at the top level, not in their own subschema.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
const compiled = new WeakMap<Corridor, ValidateFunction>();

function validatorOf(corridor: Corridor): ValidateFunction {
  let fn = compiled.get(corridor);
  if (!fn) {
    fn = ajv.compile(corridor.schema);
    compiled.set(corridor, fn);
  }
  return fn;
}

function fieldOf(corridor: Corridor, name: string): CorridorField | undefined {
  return corridor.fields.find((f) => f.name === name);
}

const FIELD_NAME = /^[a-z][a-z0-9_]{0,63}$/;

function issueOf(corridor: Corridor, err: ErrorObject): DetailIssue | null {
  const name = err.instancePath.split('/')[1];
  const f = name ? fieldOf(corridor, name) : undefined;
  switch (err.keyword) {
    case 'required': {
      // `required` inside allOf/anyOf is the "one of these" rule, reported once by its anyOf error.
      if (err.schemaPath.includes('anyOf')) return null;
      return { path: `details.${(err.params as { missingProperty: string }).missingProperty}`, message: 'is required' };
    }
    case 'anyOf': {
      const group = corridor.one_of?.[Number(err.schemaPath.split('/')[2])] ?? [];
      return { path: `details.${group[0] ?? ''}`, message: `one of ${group.join(', ')} is required` };
    }
    case 'additionalProperties': {
      // A name is echoed only if it looks like a field name: a phone number sent as a key is still a phone number.
      const extra = (err.params as { additionalProperty: string }).additionalProperty;
      if (FIELD_NAME.test(extra)) return { path: `details.${extra}`, message: `is not a field of ${corridor.currency} ${corridor.payment_method}` };
      return { path: 'details', message: `has a field that is not one of ${corridor.currency} ${corridor.payment_method} (its name is not repeated here)` };
    }
    case 'type':
      return name ? { path: `details.${name}`, message: 'must be a string' } : { path: 'details', message: 'must be an object' };
    case 'enum':
      return { path: `details.${name}`, message: `must be one of: ${f?.enum?.join(', ')}` };
    case 'pattern':
      return { path: `details.${name}`, message: `is not in the expected format: ${f?.description ?? 'see the requirements'}` };
    case 'minLength':
      return { path: `details.${name}`, message: `must be at least ${f?.min_length} characters` };
    case 'maxLength':
      return { path: `details.${name}`, message: `must be at most ${f?.max_length} characters` };
    default:
      return { path: name ? `details.${name}` : 'details', message: 'is invalid' };
  }
}

/** ISO 13616 mod-97 check: catches a mistyped IBAN before it reaches a bank. */
export function ibanChecksumValid(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (const ch of rearranged) {
    const digits = /[0-9]/.test(ch) ? ch : String(ch.charCodeAt(0) - 55);
    for (const d of digits) remainder = (remainder * 10 + Number(d)) % 97;
  }
  return remainder === 1;
}

/** Every problem with `details` for this corridor, field by field; empty when they satisfy it. */
export function detailIssues(corridor: Corridor, details: unknown): DetailIssue[] {
  const fn = validatorOf(corridor);
  const issues: DetailIssue[] = [];
  if (!fn(details)) {
    const seen = new Set<string>();
    for (const err of fn.errors ?? []) {
      const i = issueOf(corridor, err);
      if (!i || seen.has(`${i.path}|${i.message}`)) continue;
      seen.add(`${i.path}|${i.message}`);
      issues.push(i);
    }
    return issues;
  }
  const iban = (details as Details).iban;
  if (iban !== undefined && !ibanChecksumValid(iban)) issues.push({ path: 'details.iban', message: 'fails the IBAN check digits' });
  return issues;
}

/** Returns `details` typed, or throws 422 requirements_not_met listing the fields. */
export function checkDetails(corridor: Corridor, details: unknown): Details {
  const issues = detailIssues(corridor, details);
  if (issues.length === 0) return details as Details;
  const first = `${issues[0].path} ${issues[0].message}`.replace(/\.$/, '');
  throw new AppError('requirements_not_met', `details do not meet the ${corridor.currency} ${corridor.payment_method} requirements: ${first}.`, issues);
}

/** Keeps the last 4 characters; a value of 4 or fewer characters is masked whole. */
export function redactValue(value: string): string {
  const chars = [...value];
  if (chars.length <= 4) return '*'.repeat(chars.length);
  return '*'.repeat(chars.length - 4) + chars.slice(-4).join('');
}

/** What a response may show: sensitive fields redacted, the rest as stored. */
export function redactDetails(corridor: Corridor, details: Details): Details {
  return Object.fromEntries(Object.entries(details).map(([name, value]) => [name, fieldOf(corridor, name)?.sensitive ? redactValue(value) : value]));
}

/**
 * A mobile-money payer (an on-ramp's, a payment intent's) checked against the corridor's rules, reported against the
 * fields the request has: `payment_method.phone_number`, not `details.*`.
 */
export function checkPayer(corridor: Corridor, method: { phone_number: string; mobile_network: string }): { phone_number: string; mobile_network: string } {
  try {
    const checked = checkDetails(corridor, { phone_number: method.phone_number, mobile_network: method.mobile_network });
    return { phone_number: checked.phone_number, mobile_network: checked.mobile_network };
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'requirements_not_met') throw err;
    const issues = (err.details as { path: string; message: string }[]).map((i) => ({ path: i.path.replace(/^details\./, 'payment_method.'), in: 'body', message: i.message.replace(/\.$/, '') }));
    throw AppError.invalid(`The payer's number does not fit the ${corridor.currency} ${corridor.payment_method} corridor: ${issues[0]?.path} ${issues[0]?.message}.`, issues);
  }
}
