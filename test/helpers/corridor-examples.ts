// Valid and invalid `details` for every corridor, shared by the unit and API tests. Every corridor in the
// registry must appear here (the corridor unit test checks), so a new corridor cannot ship untested.
// The values differ from the registry's own examples, so a test looking for a leaked value cannot match a description.

export interface CorridorExample {
  valid: Record<string, string>;
  /** field -> a value of the right type that breaks the field's rule */
  invalid: Record<string, string>;
}

const SWIFT_VALID = {
  swift_bic: 'DEUTDEFF',
  iban: 'DE89370400440532013000',
  bank_name: 'Deutsche Bank',
  bank_country: 'DE',
  address_line1: '1 Hauptstrasse',
  address_city: 'Berlin',
  address_country: 'DE',
};
const SWIFT_INVALID = { swift_bic: 'DEUT-DE', iban: 'DE89370400440532013001', bank_country: 'Germany', address_country: 'deu' };

export const CORRIDOR_EXAMPLES: Record<string, CorridorExample> = {
  'KES:mobile_money': { valid: { phone_number: '+254722480163', mobile_network: 'safaricom' }, invalid: { phone_number: '0712345678', mobile_network: 'mtn' } },
  'KES:paybill': { valid: { paybill_number: '888880', account_number: 'ACC-001' }, invalid: { paybill_number: '12', account_number: 'ACCOUNT-NUMBER-TOO-LONG' } },
  'KES:buy_goods': { valid: { till_number: '5123456' }, invalid: { till_number: '51234567' } },
  'KES:bank_transfer': { valid: { bank_code: '01', branch_code: '094', account_number: '1234567890123' }, invalid: { bank_code: '1', account_number: '12AB' } },
  'UGX:mobile_money': { valid: { phone_number: '+256781904412', mobile_network: 'mtn' }, invalid: { phone_number: '+254772123456', mobile_network: 'safaricom' } },
  'TZS:mobile_money': { valid: { phone_number: '+255754330921', mobile_network: 'vodacom' }, invalid: { phone_number: '+2557123456789', mobile_network: 'tigo' } },
  'RWF:mobile_money': { valid: { phone_number: '+250733615248', mobile_network: 'airtel' }, invalid: { phone_number: '+250 781234567', mobile_network: 'vodacom' } },
  'GHS:mobile_money': { valid: { phone_number: '+233277509836', mobile_network: 'airteltigo' }, invalid: { phone_number: '+233141234567', mobile_network: 'glo' } },
  'GHS:bank_transfer': { valid: { bank_code: '030100', account_number: '1234567890123' }, invalid: { bank_code: '0301', account_number: '1234567' } },
  'NGN:bank_transfer': { valid: { bank_code: '058', account_number: '0123456789' }, invalid: { bank_code: 'GTB', account_number: '012345678' } },
  'ZAR:bank_transfer': { valid: { bank_code: '250655', account_number: '62123456789', account_type: 'cheque' }, invalid: { bank_code: '25065', account_type: 'current' } },
  'CAD:email_transfer': { valid: { email: 'payee@example.ca' }, invalid: { email: 'payee.example.ca' } },
  'USD:swift_transfer': {
    valid: {
      swift_bic: 'CHASUS33XXX', account_number: '000123456789', bank_name: 'JPMorgan Chase', bank_country: 'US',
      address_line1: '1 Main St', address_line2: 'Suite 5', address_city: 'New York', address_postal_code: '10001', address_country: 'US',
    },
    invalid: { ...SWIFT_INVALID, account_number: '12-34' },
  },
  'EUR:swift_transfer': { valid: SWIFT_VALID, invalid: SWIFT_INVALID },
  'GBP:swift_transfer': { valid: { ...SWIFT_VALID, swift_bic: 'NWBKGB2L', iban: 'GB82WEST12345698765432', bank_country: 'GB', address_postal_code: 'EC1A 1BB', address_country: 'GB' }, invalid: SWIFT_INVALID },
};
