import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { getCorridor, listCorridors, PAYMENT_METHODS, requireCorridor } from '../../shared/domain/corridors.js';
import { detailIssues, ibanChecksumValid, redactDetails, redactValue } from '../../shared/domain/corridor-details.js';
import { formatAmount, scaleOf, toMinor } from '../../shared/domain/money.js';
import { AppError } from '../../shared/errors.js';
import { CORRIDOR_EXAMPLES } from '../helpers/corridor-examples.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const keyOf = (c: { currency: string; payment_method: string }) => `${c.currency}:${c.payment_method}`;

describe('corridor registry', () => {
  it('serves exactly the contract\'s corridors, each with an example in the tests', () => {
    const keys = listCorridors().map(keyOf).sort();
    expect(keys).to.deep.equal([
      'CAD:email_transfer', 'EUR:swift_transfer', 'GBP:swift_transfer', 'GHS:bank_transfer', 'GHS:mobile_money',
      'KES:bank_transfer', 'KES:buy_goods', 'KES:mobile_money', 'KES:paybill', 'NGN:bank_transfer', 'RWF:mobile_money',
      'TZS:mobile_money', 'UGX:mobile_money', 'USD:swift_transfer', 'ZAR:bank_transfer',
    ]);
    expect(Object.keys(CORRIDOR_EXAMPLES).sort()).to.deep.equal(keys);
  });

  it('looks corridors up by currency and method, and refuses others with 422 unsupported_corridor', () => {
    expect(getCorridor('KES', 'paybill')?.provider).to.equal('mpesa_daraja');
    expect(getCorridor('KES', 'email_transfer')).to.equal(undefined);
    expect(getCorridor('kes', 'mobile_money')).to.equal(undefined);
    try {
      requireCorridor('NGN', 'mobile_money');
      expect.fail('should throw');
    } catch (err) {
      expect(err).to.be.instanceOf(AppError);
      expect((err as AppError).code).to.equal('unsupported_corridor');
      expect((err as AppError).details).to.deep.include({ supported_payment_methods: ['bank_transfer'] });
    }
  });

  it('says truly what the currency supports in the direction asked, and points at GET /corridors', () => {
    const refusal = (fn: () => unknown): AppError => {
      try {
        fn();
      } catch (err) {
        expect(err).to.be.instanceOf(AppError);
        expect((err as AppError).code).to.equal('unsupported_corridor');
        expect((err as AppError).message).to.match(/ GET \/corridors lists every currency, payment method and direction we serve\.$/);
        return err as AppError;
      }
      return expect.fail('should throw');
    };
    // An on-ramp in a currency we only pay out: not "we do not pay out", and no off-ramp methods offered as on-ramp ones.
    const ngnIn = refusal(() => requireCorridor('NGN', 'mobile_money', 'onramp'));
    expect(ngnIn.message).to.match(/^We do not collect NGN by mobile_money: NGN is paid out only \(off-ramps, by bank_transfer\); no on-ramps run in it\./);
    expect(ngnIn.details).to.deep.equal({ currency: 'NGN', payment_method: 'mobile_money', direction: 'onramp', supported_payment_methods: [] });
    const ngnOut = refusal(() => requireCorridor('NGN', 'mobile_money', 'offramp'));
    expect(ngnOut.message).to.match(/^We do not pay out NGN by mobile_money: NGN is paid out by bank_transfer\./);
    // The pair exists, the direction does not: the methods that do run in it.
    const paybillIn = refusal(() => requireCorridor('KES', 'paybill', 'onramp'));
    expect(paybillIn.message).to.match(/^We do not collect KES by paybill: KES is collected by mobile_money\./);
    expect(paybillIn.details).to.deep.include({ reason: 'direction_not_supported', supported_directions: ['offramp'], supported_payment_methods: ['mobile_money'] });
    expect(refusal(() => requireCorridor('KES', 'email_transfer', 'offramp')).message).to.match(/^We do not pay out KES by email_transfer: KES is paid out by mobile_money, paybill, buy_goods or bank_transfer\./);
    // A currency we do not serve at all.
    expect(refusal(() => requireCorridor('XYZ', 'mobile_money', 'onramp')).message).to.equal('We do not serve XYZ. GET /corridors lists every currency, payment method and direction we serve.');
    expect(requireCorridor('KES', 'paybill').payment_method, 'no direction: any').to.equal('paybill');
  });

  it('raises every unsupported_corridor through corridorError, so each names GET /corridors', () => {
    const found = spawnSync('git', ['grep', '-l', "new AppError('unsupported_corridor'", '--', 'api', 'shared', 'workers'], { cwd: ROOT, encoding: 'utf8' });
    expect(found.status, found.stderr).to.equal(1); // git grep: 1 is "nothing found"
    expect(found.stdout).to.equal('');
  });

  it('routes M-Pesa corridors to Daraja and names a provider for every other', () => {
    for (const c of listCorridors()) {
      const daraja = c.currency === 'KES' && ['mobile_money', 'paybill', 'buy_goods'].includes(c.payment_method);
      expect(c.provider === 'mpesa_daraja', keyOf(c)).to.equal(daraja);
      expect(c.provider).to.match(/^[a-z_]+$/);
    }
    expect(getCorridor('KES', 'mobile_money')!.directions).to.include('onramp');
  });

  it('has min and max amounts as decimal strings at the currency scale, min below max', () => {
    for (const c of listCorridors()) {
      const scale = scaleOf(c.currency);
      expect(formatAmount(c.min_amount, scale), keyOf(c)).to.equal(c.min_amount);
      expect(formatAmount(c.max_amount, scale), keyOf(c)).to.equal(c.max_amount);
      expect(toMinor(c.min_amount, scale) > 0n && toMinor(c.min_amount, scale) < toMinor(c.max_amount, scale), keyOf(c)).to.equal(true);
    }
  });

  it('derives a closed JSON Schema from the fields', () => {
    for (const c of listCorridors()) {
      expect(PAYMENT_METHODS).to.include(c.payment_method);
      expect(c.schema.additionalProperties, keyOf(c)).to.equal(false);
      expect(c.schema.required).to.deep.equal(c.fields.filter((f) => f.required).map((f) => f.name));
      expect(Object.keys(c.schema.properties as object)).to.deep.equal(c.fields.map((f) => f.name));
      for (const f of c.fields) {
        expect(f.type).to.equal('string');
        expect(f.description, `${keyOf(c)} ${f.name}`).to.be.a('string').and.not.empty;
        if (f.pattern) expect(() => new RegExp(f.pattern!, 'u')).not.to.throw();
      }
    }
  });

  it('marks phones, account numbers, IBANs and emails sensitive', () => {
    for (const c of listCorridors()) {
      for (const f of c.fields) {
        const shouldBe = ['phone_number', 'account_number', 'iban', 'email'].includes(f.name);
        expect(f.sensitive, `${keyOf(c)} ${f.name}`).to.equal(shouldBe);
      }
    }
  });

  it('uses E.164 with the country code and the contract\'s networks for mobile money', () => {
    const expected: Record<string, [string, string[]]> = {
      KES: ['+254', ['safaricom', 'airtel']],
      UGX: ['+256', ['mtn', 'airtel']],
      TZS: ['+255', ['mtn', 'airtel', 'vodacom']],
      RWF: ['+250', ['mtn', 'airtel']],
      GHS: ['+233', ['mtn', 'vodafone', 'airteltigo']],
    };
    for (const [currency, [prefix, networks]] of Object.entries(expected)) {
      const c = getCorridor(currency, 'mobile_money')!;
      expect(c.fields.find((f) => f.name === 'phone_number')!.pattern).to.match(new RegExp(`^\\^\\\\${prefix.replace('+', '\\+')}`));
      expect(c.fields.find((f) => f.name === 'mobile_network')!.enum).to.deep.equal(networks);
    }
  });
});

describe('corridor details', () => {
  for (const c of listCorridors()) {
    const example = CORRIDOR_EXAMPLES[keyOf(c)];

    it(`${keyOf(c)}: accepts valid details`, () => {
      expect(detailIssues(c, example.valid)).to.deep.equal([]);
    });

    it(`${keyOf(c)}: reports each broken field without echoing its value`, () => {
      for (const [name, bad] of Object.entries(example.invalid)) {
        const issues = detailIssues(c, { ...example.valid, [name]: bad });
        expect(issues.map((i) => i.path), name).to.deep.equal([`details.${name}`]);
        expect(JSON.stringify(issues)).not.to.contain(bad);
      }
    });

    it(`${keyOf(c)}: requires each required field and refuses unknown ones and non-strings`, () => {
      for (const f of c.fields.filter((x) => x.required)) {
        const { [f.name]: _dropped, ...rest } = example.valid;
        expect(detailIssues(c, rest)).to.deep.include({ path: `details.${f.name}`, message: 'is required' });
      }
      expect(detailIssues(c, { ...example.valid, routing_number: '021000021' })[0].path).to.equal('details.routing_number');
      const first = c.fields[0].name;
      expect(detailIssues(c, { ...example.valid, [first]: 12345678 })).to.deep.equal([{ path: `details.${first}`, message: 'must be a string' }]);
      expect(detailIssues(c, null)).to.deep.equal([{ path: 'details', message: 'must be an object' }]);
    });
  }

  it('needs an iban or an account_number for SWIFT transfers', () => {
    const c = getCorridor('EUR', 'swift_transfer')!;
    const { iban: _i, ...withoutIban } = CORRIDOR_EXAMPLES['EUR:swift_transfer'].valid;
    expect(detailIssues(c, withoutIban)).to.deep.equal([{ path: 'details.iban', message: 'one of iban, account_number is required' }]);
    expect(detailIssues(c, { ...withoutIban, account_number: 'DE0012345678' })).to.deep.equal([]);
  });

  it('names an unknown detail field only when it looks like a field name, never a value sent as a key', () => {
    const c = getCorridor('KES', 'mobile_money')!;
    const valid = CORRIDOR_EXAMPLES['KES:mobile_money'].valid;
    const issues = detailIssues(c, { ...valid, '+254722000334': 'x' });
    expect(issues).to.deep.equal([{ path: 'details', message: 'has a field that is not one of KES mobile_money (its name is not repeated here)' }]);
    expect(detailIssues(c, { ...valid, branch_code: '001' })).to.deep.equal([{ path: 'details.branch_code', message: 'is not a field of KES mobile_money' }]);
  });

  it('checks IBAN check digits', () => {
    expect(ibanChecksumValid('GB82WEST12345698765432')).to.equal(true);
    expect(ibanChecksumValid('DE89370400440532013000')).to.equal(true);
    expect(ibanChecksumValid('GB82WEST12345698765433')).to.equal(false);
  });
});

describe('redaction', () => {
  it('keeps only the last 4 characters of a value', () => {
    expect(redactValue('+254712345678')).to.equal('*********5678');
    expect(redactValue('0123456789')).to.equal('******6789');
    expect(redactValue('1234')).to.equal('****');
  });

  it('redacts sensitive fields and leaves the others readable', () => {
    const c = getCorridor('KES', 'paybill')!;
    expect(redactDetails(c, { paybill_number: '888880', account_number: 'ACC-001234' })).to.deep.equal({ paybill_number: '888880', account_number: '******1234' });
    const m = getCorridor('GHS', 'mobile_money')!;
    expect(redactDetails(m, { phone_number: '+233241234567', mobile_network: 'mtn' })).to.deep.equal({ phone_number: '*********4567', mobile_network: 'mtn' });
  });
});
