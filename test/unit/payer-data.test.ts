import { expect } from 'chai';
import { redactCustomer, redactEmail, redactPhone } from '../../shared/domain/payer-data.js';
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { darajaPayerPhone, parseDarajaCallback, redactCallbackBody } from '../../shared/providers/daraja/callbacks.js';
import { legacyPayerKey, payerKey, payerKeys } from '../../shared/providers/daraja/msisdn.js';

const KEYS = [{ id: 'k2', key: Buffer.alloc(32, 2) }, { id: 'k1', key: Buffer.alloc(32, 1) }];

describe('payer data redaction (CONTRACT §15)', () => {
  it('a phone keeps its country code and last 4 digits', () => {
    expect(redactPhone('+254711223344')).to.equal('+254*****3344');
    expect(redactPhone('+256712345678')).to.equal('+256*****5678');
    expect(redactPhone('+27821234567')).to.equal('+27*****4567');
    expect(redactPhone('+14155550123')).to.equal('+1******0123');
    expect(redactPhone('0711223344')).to.equal('******3344');
    expect(redactPhone('+2543344')).to.equal('***3344');
  });

  it('an email keeps its first character and its domain', () => {
    expect(redactEmail('amina@example.com')).to.equal('a***@example.com');
    expect(redactEmail('rev@sub.example.co.ke')).to.equal('r***@sub.example.co.ke');
    expect(redactEmail('not-an-email')).to.equal('***');
  });

  it('an intent customer: phone and email redacted, the rest as given', () => {
    expect(redactCustomer({ id: 'c1', name: 'Rev', phone_number: '+254711223344', email: 'rev@example.com' }))
      .to.deep.equal({ id: 'c1', name: 'Rev', phone_number: '+254*****3344', email: 'r***@example.com' });
    expect(redactCustomer(null)).to.equal(null);
  });

  it('a Daraja callback body keeps every phone redacted, and its payer digest is taken before', () => {
    const stk = { Body: { stkCallback: {
      MerchantRequestID: '29115-34620561-1', CheckoutRequestID: 'ws_CO_191220191020363925', ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
      CallbackMetadata: { Item: [{ Name: 'Amount', Value: 1500 }, { Name: 'MpesaReceiptNumber', Value: 'NLJ7RT61SV' }, { Name: 'TransactionDate', Value: 20191219102115 }, { Name: 'PhoneNumber', Value: 254708374149 }] },
    } } };
    const redacted = redactCallbackBody(stk) as typeof stk;
    expect(JSON.stringify(redacted)).not.to.contain('708374149');
    expect(redacted.Body.stkCallback.CallbackMetadata.Item[3]).to.deep.equal({ Name: 'PhoneNumber', Value: '254*****4149' });
    expect(redacted.Body.stkCallback.CheckoutRequestID).to.equal('ws_CO_191220191020363925');
    expect(redacted.Body.stkCallback.CallbackMetadata.Item[2]).to.deep.equal({ Name: 'TransactionDate', Value: 20191219102115 });
    expect(darajaPayerPhone('stk', stk)).to.equal('254708374149');
    expect(payerKeys(KEYS, darajaPayerPhone('stk', redacted) ?? '')).to.deep.equal([]);
    expect(parseDarajaCallback('stk', stk)?.payers).to.equal(undefined);

    const b2c = { Result: { ResultParameters: { ResultParameter: [{ Key: 'ReceiverPartyPublicName', Value: '254708374149 - John Doe' }, { Key: 'TransactionAmount', Value: 10 }] }, PartyA: '0708374149', msisdn: '+254708374149' } };
    const text = JSON.stringify(redactCallbackBody(b2c));
    expect(text).not.to.contain('708374149');
    expect(text).to.contain('254*****4149 - John Doe').and.to.contain('"msisdn":"+254*****4149"').and.to.contain('"TransactionAmount","Value":10');
  });

  it('a Daraja callback body keeps M-Pesa\'s identifiers as sent, though their digits look like a phone (a result is matched by them)', () => {
    // Seen in CI: a CheckoutRequestID ending in 0785470880 stored as ...******0880, so its decline matched no prompt.
    const stk = { Body: { stkCallback: {
      MerchantRequestID: '29115-0712345678', CheckoutRequestID: 'ws_CO_fd5f1eeb57664f2aa4349b0785470880', ResultCode: 1032, ResultDesc: 'Request cancelled by user',
      CallbackMetadata: { Item: [{ Name: 'MpesaReceiptNumber', Value: 'X0712345678' }, { Name: 'PhoneNumber', Value: 254708374149 }] },
    } } };
    const redacted = redactCallbackBody(stk) as typeof stk;
    expect(redacted.Body.stkCallback.CheckoutRequestID).to.equal('ws_CO_fd5f1eeb57664f2aa4349b0785470880');
    expect(redacted.Body.stkCallback.MerchantRequestID).to.equal('29115-0712345678');
    expect(redacted.Body.stkCallback.CallbackMetadata.Item).to.deep.equal([{ Name: 'MpesaReceiptNumber', Value: 'X0712345678' }, { Name: 'PhoneNumber', Value: '254*****4149' }]);
    expect(parseDarajaCallback('stk', redacted)?.outcome.provider_reference).to.equal('ws_CO_fd5f1eeb57664f2aa4349b0785470880');

    const b2c = { Result: {
      ConversationID: 'AG_20191219_0712345678', OriginatorConversationID: '16740-0712345678', TransactionID: 'NLJ0712345678',
      ResultParameters: { ResultParameter: [{ Key: 'TransactionReceipt', Value: 'NLJ0712345678' }, { Key: 'ReceiverPartyPublicName', Value: '0708374149 - John Doe' }] },
    } };
    const kept = redactCallbackBody(b2c) as typeof b2c;
    expect(kept.Result.ConversationID).to.equal('AG_20191219_0712345678');
    expect(kept.Result.OriginatorConversationID).to.equal('16740-0712345678');
    expect(kept.Result.TransactionID).to.equal('NLJ0712345678');
    expect(kept.Result.ResultParameters.ResultParameter).to.deep.equal([{ Key: 'TransactionReceipt', Value: 'NLJ0712345678' }, { Key: 'ReceiverPartyPublicName', Value: '******4149 - John Doe' }]);
    // Only Daraja's spelling of an identifier: a phone under a camel-case id (MoMo's partyId) is still redacted.
    expect(JSON.stringify(redactCallbackBody({ payer: { partyIdType: 'MSISDN', partyId: '0708374149' } }))).not.to.contain('708374149');
  });

  it('a payer digest is keyed (HMAC under a key derived from ENCRYPTION_KEYS), never the plain hash a phone book reverses', () => {
    const digest = payerKey(KEYS, '+254708374149')!;
    expect(digest).to.match(/^k2:[0-9a-f]{64}$/);
    // The plain hash of old rows, and the hash anyone can compute from a guessed number, are not it.
    const plain = createHash('sha256').update('rampway-payer:254708374149').digest('hex');
    expect(legacyPayerKey('+254708374149')).to.equal(plain);
    expect(digest).not.to.contain(plain);
    expect(digest.slice(3)).not.to.equal(createHash('sha256').update('254708374149').digest('hex'));
    // One number in any of its forms; another key, another digest; a callback carries one per key.
    expect(payerKey(KEYS, '0708374149')).to.equal(digest);
    expect(payerKey([KEYS[1]], '+254708374149')).to.match(/^k1:/).and.not.equal(digest);
    expect(payerKeys(KEYS, '254708374149')).to.deep.equal([digest, payerKey([KEYS[1]], '+254708374149')]);
    expect(payerKey(KEYS, 'not a phone')).to.equal(null);
  });

  it('a payer digest depends on the key\'s secret, not its id: HMAC-SHA256 under a key derived (HKDF) from it, never the key itself', () => {
    const [key] = KEYS;
    const derived = Buffer.from(hkdfSync('sha256', key.key, Buffer.alloc(0), 'rampway payer digest', 32));
    expect(payerKey([key], '+254708374149')).to.equal(`k2:${createHmac('sha256', derived).update('254708374149').digest('hex')}`);
    // The same id over another secret (a guessed key id is no help), and the HMAC under the raw key, are not it.
    expect(payerKey([{ id: 'k2', key: Buffer.alloc(32, 9) }], '+254708374149')).not.to.equal(payerKey([key], '+254708374149'));
    expect(payerKey([key], '+254708374149')).not.to.equal(`k2:${createHmac('sha256', key.key).update('254708374149').digest('hex')}`);
  });
});
