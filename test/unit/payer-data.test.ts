import { expect } from 'chai';
import { redactCustomer, redactEmail, redactPhone } from '../../shared/domain/payer-data.js';
import { parseDarajaCallback, redactCallbackBody } from '../../shared/providers/daraja/callbacks.js';
import { payerKey } from '../../shared/providers/daraja/msisdn.js';

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
    expect(parseDarajaCallback('stk', stk)?.payer).to.equal(payerKey('+254708374149'));
    expect(parseDarajaCallback('stk', redacted)?.payer).to.equal(null);

    const b2c = { Result: { ResultParameters: { ResultParameter: [{ Key: 'ReceiverPartyPublicName', Value: '254708374149 - John Doe' }, { Key: 'TransactionAmount', Value: 10 }] }, PartyA: '0708374149', msisdn: '+254708374149' } };
    const text = JSON.stringify(redactCallbackBody(b2c));
    expect(text).not.to.contain('708374149');
    expect(text).to.contain('254*****4149 - John Doe').and.to.contain('"msisdn":"+254*****4149"').and.to.contain('"TransactionAmount","Value":10');
  });
});
