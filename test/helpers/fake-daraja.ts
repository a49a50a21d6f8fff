// Our own HTTP server that plays M-Pesa Daraja in Safaricom's published shapes (OAuth, STK Push, STK Query, B2C v3,
// B2B, Transaction Status, and the callbacks it posts), written from what Safaricom and integrators publish, never
// from our parser (read 2026-11-25 with the search tool):
//   - STK callback `Body.stkCallback.CallbackMetadata.Item`: `{ Name, Value }` entries, `{ "Name": "Balance" }` with no
//     Value (Daraja STK Push docs as reproduced in github.com/Ghostscypher/php-mpesa mpesa_endpoints.md, and captured
//     bodies in github.com/PatrickNthiwa/Daraja_mpesa_api_C2B CallBackResponse.txt, paidtag.com/docs/1.0/callback).
//   - B2C / B2B / Transaction Status results `Result { ResultType, ResultCode, ResultDesc, OriginatorConversationID,
//     ConversationID, TransactionID, ResultParameters.ResultParameter, ReferenceData.ReferenceItem }`, parameters as
//     `{ Key, Value }` (Value absent for empty ones, e.g. TransactionReason), a list or one object
//     (php-mpesa mpesa_endpoints.md; github.com/maukoese/mpesainside howto.php). A failed result carries no
//     ResultParameters, and its ReferenceItem may be `{ "Key": "Occasion" }` without Value (captured in
//     github.com/Byte-Barn/mpesakit issue 102, github.com/dkiptugen/mpesa-php-full-integration issue 1).
//   - Transaction Status for a request M-Pesa has no record of: the query is accepted, and its result says
//     ResultCode 2032 (issue 22, seen live). The result's OriginatorConversationID is the query's own, as the
//     synchronous answer gave it.
//   - QueueTimeOutURL: the gateway posts there when the request sat too long in M-Pesa's queue; the request may still
//     run (osenco/mpesa wiki "Processing Timeouts", pesakit.landelatech.com "timeout callbacks are not the same as
//     final failure"). Its body is not published: the stand-in posts a Result naming the request with code 1037.
//   - STK prompt results (callback and STK Query ResultCode): PUBLISHED_STK_RESULT_CODES below, as Safaricom's list is
//     reproduced by integrators (api-evangelist/mpesa errors/mpesa-result-codes.yml citing developer.safaricom.co.ke,
//     kenzobe.com "M-Pesa Daraja API Common Errors", paylod.dev/docs/errors); `answerStk` makes a prompt end with any.
// It keeps a request log and counts payouts M-Pesa executed, and the last four digits of the payer or receiver pick
// what it does, so a test reads its scenario from its data:
//   collections: 0001 declined (1032), 0037 no answer (1037), 0099 callback lost, 0098 no callback and STK Query "being processed" for ever, 0022 callback sent twice,
//                0066 the prompt is sent but the STK Push answer comes after `holdMs` (our request times out),
//                0050 the prompt is sent and answered HTTP 500 with Daraja's error body, 0051 sent and answered a bare 503;
//   payouts:     0001 our float short (ResultCode 1) on the first request, 0011 on every request, 0002 invalid receiver (2040),
//                0003 HTTP 503 on the first request (not executed), 0006 executed and then HTTP 500,
//                0007 executed and then HTTP 500 with Daraja's error body (errorCode 500.003.1001),
//                0055 executed, and only a queue-timeout callback comes, 0099 result lost,
//                0077 the request is held `holdMs` before its answer (a worker can die meanwhile),
//                0088 accepted and then silence (no result, and Transaction Status never answers either).
// B2C / B2B result codes are Safaricom's published ones (B2C_RESULT_CODES: Daraja's result code list as reproduced in
// php-mpesa mpesa_endpoints.md "M-Pesa Result and Response Codes" and Peach Payments' M-Pesa error mapping); a test
// picks the codes a reference's next requests are answered with (`payoutResults`). A Transaction Status result for a
// request that ended unpaid says `TransactionStatus: Failed` with the request's code in `TransactionReasonCode`.
// Beyond the scenarios, a test can end a prompt with any STK code (`answerStk`), make STK Query lag the callback as
// it does live (`stkQueryLagMs`), make M-Pesa change its mind (`payLate`: a prompt reported ended unpaid
// is paid after all; `endPayout`: a held payout ends with a result), or forge what M-Pesa never said
// (`forgedStkSuccess`: a success-shaped callback for a prompt whose real status is not paid).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';

export interface LoggedRequest {
  path: string;
  body: Record<string, any>;
  at: number;
}

interface Payment {
  kind: 'collection' | 'payout';
  /** STK: CheckoutRequestID; payouts: OriginatorConversationID as sent (B2C) or ours (B2B). */
  key: string;
  resultCode: string;
  resultDesc: string;
  conversationId: string;
  originator: string;
  receipt: string;
  amount: number;
  /** STK: the MSISDN prompted (a number in the callback, as Daraja sends it). */
  phone?: string;
  /** STK: where its callback goes. */
  callbackUrl?: string;
  /** STK: the AccountReference it was pushed with (Pull Transactions' `billreference`) and when it was paid. */
  billReference?: string;
  at?: number;
}

/**
 * Every STK Push result code Safaricom publishes, with its ResultDesc (read 2026-11-28 with the search tool; sources in
 * the header): 0 is the only success, every other code is a prompt that ended without collecting.
 */
export const PUBLISHED_STK_RESULT_CODES: Record<string, string> = {
  '0': 'The service request is processed successfully.',
  '1': 'The balance is insufficient for the transaction.',
  '17': 'Unable to process by Party B: the receiving shortcode is temporarily unavailable.',
  '26': 'System busy. The service request is rejected.',
  '1001': 'Unable to lock subscriber, a transaction is already in process for the current subscriber',
  '1019': 'Transaction has expired',
  '1025': 'An error occurred while sending a push request',
  '1032': 'Request cancelled by user',
  '1036': 'SMSC ACK timeout: the payer could not be reached',
  '1037': 'DS timeout user cannot be reached',
  '2001': 'The initiator information is invalid.',
  '9999': 'An error occurred while sending a push request.',
};

/** Pull Transactions' date format: `2020-08-04 08:36:00`, Nairobi time as Safaricom keeps it (UTC+3). */
function pullDate(text: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{1,2}):(\d{2})(?::(\d{2}))?/.exec(text ?? '');
  return m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4] - 3, +m[5], +(m[6] ?? 0)) : NaN;
}

export interface FakeDaraja {
  url: string;
  log: LoggedRequest[];
  /** Callback posts and their HTTP answers. */
  callbacks: { url: string; status: number; body: unknown }[];
  tokenRequests: number;
  /** Lifetime of the tokens it issues (seconds; Daraja says 3599). */
  expiresIn: number;
  /** Where callbacks go: the request's URL with this origin (our API listens on a port chosen at run time). */
  callbackOrigin: string;
  callbackDelayMs: number;
  /** For this long after a prompt, STK Query still answers "being processed" (M-Pesa's record lags its callback). */
  stkQueryLagMs: number;
  holdMs: number;
  /** Callbacks whose URL this answers true for are never delivered (lost on the way), e.g. only B2C results. */
  loses: ((url: string) => boolean) | null;
  /** While set, the token endpoint answers 503 (Daraja's gateway down): nothing else can be called. */
  oauthDown: boolean;
  /** The CheckoutRequestIDs of the prompts sent to an MSISDN (digits, as Daraja takes it), oldest first. */
  checkoutsFor(msisdn: string): string[];
  /** Runs before a Transaction Status query is answered (a test makes something happen meanwhile); cleared after. */
  beforeStatusAnswer: (() => Promise<void>) | null;
  /** Payouts M-Pesa executed (money moved), per our reference: more than 1 is a double payment. */
  executions: Map<string, number>;
  payoutsTo(reference: string): LoggedRequest[];
  /** A result exactly as the fake would post it for a payout it made (tests replay or alter it). */
  resultFor(reference: string): Record<string, any> | null;
  /** The STK callback as the fake would post it for a prompt (CheckoutRequestID), or null. */
  stkCallbackFor(checkoutRequestId: string): Record<string, any> | null;
  /** The next prompt to this MSISDN (digits, as Daraja takes it) ends with `resultCode` (any code, published or not). */
  answerStk(msisdn: string, resultCode: string): void;
  /** The payer approves a prompt M-Pesa had answered 1037 (timed out): STK Query says paid from now on, and the success callback is posted. */
  payLate(checkoutRequestId: string): Promise<void>;
  /** A success-shaped STK callback for a prompt, with its Amount and PhoneNumber (changed by `change`), while M-Pesa's record of it stays as it is. */
  forgedStkSuccess(checkoutRequestId: string, change?: { amount?: number; phone?: string }): Record<string, any>;
  /** A payout M-Pesa held (0088) ends with `resultCode` (not paid unless 0): Transaction Status answers it from now on. */
  endPayout(reference: string, resultCode: string, resultDesc: string): void;
  /** The published result codes the next payout requests of a reference (our OriginatorConversationID) get, one each. */
  payoutResults: Map<string, string[]>;
  /** The published result codes the next payout requests to a payee (PartyB, digits) get, one each, after payoutResults. */
  payeeResults: Map<string, string[]>;
  /** The ConversationIDs M-Pesa gave a reference's payout requests, oldest first. */
  conversationsOf(reference: string): string[];
  close(): Promise<void>;
}

/** Safaricom's published B2C / B2B ResultCodes and their descriptions. */
export const B2C_RESULT_CODES: Record<string, string> = {
  '0': 'The service request is processed successfully.', '1': 'The balance is insufficient for the transaction.',
  '2': 'Declined due to limit rule: less than the minimum transaction amount.', '3': 'Declined due to limit rule: greater than the maximum transaction amount.',
  '4': 'Declined due to limit rule: would exceed daily transfer limit.', '5': 'Declined due to limit rule: would be below the minimum balance.',
  '6': 'Unresolved primary party.', '7': 'Unresolved receiver party.', '8': 'Declined due to limit rule: would exceed the maximum balance.',
  '11': 'Debit account invalid.', '12': 'Credit account invalid.', '13': 'Unresolved debit account.', '14': 'Unresolved credit account.',
  '15': 'Duplicate detected.', '17': 'Internal failure.', '20': 'Unresolved initiator.', '26': 'Traffic blocking condition in place.',
  '2001': 'The initiator information is invalid.', '2040': 'Credit Party customer type (Unregistered or Registered Customer) can\'t be supported by the service.',
  '1037': 'DS timeout user cannot be reached.',
};

const credentials = { key: 'fake-consumer-key-4d1c', secret: 'fake-consumer-secret-8e2f', shortcode: '174379', passkey: 'fake-passkey-bfb279f9aa9bdbcf' };

/** The DARAJA_ variables that point Rampway at a fake. */
export function darajaEnv(fake: FakeDaraja, publicBaseUrl: string, token: string): Record<string, string> {
  return {
    DARAJA_BASE_URL: fake.url, DARAJA_CONSUMER_KEY: credentials.key, DARAJA_CONSUMER_SECRET: credentials.secret, DARAJA_SHORTCODE: credentials.shortcode,
    DARAJA_PASSKEY: credentials.passkey, DARAJA_B2C_SHORTCODE: '600981', DARAJA_INITIATOR_NAME: 'rampway-api', DARAJA_SECURITY_CREDENTIAL: 'fake-security-credential-==',
    DARAJA_CALLBACK_TOKEN: token, PUBLIC_BASE_URL: publicBaseUrl,
  };
}

async function readJson(req: IncomingMessage): Promise<Record<string, any>> {
  let text = '';
  for await (const chunk of req) text += chunk;
  try {
    return JSON.parse(text || '{}');
  } catch {
    return {};
  }
}

const last4 = (s: unknown) => String(s ?? '').slice(-4);
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** An M-Pesa receipt: 10 upper-case letters and digits (QKH94M1Z11, LGR7OWQX0R in the published samples). */
const receiptNo = () => randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase();
/** yyyyMMddHHmmss, a number in STK callbacks and status results. */
const stamp = () => Number(new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14));

export async function startFakeDaraja(): Promise<FakeDaraja> {
  const issued = new Map<string, number>();
  const payments = new Map<string, Payment>();
  const failedOnce = new Set<string>();
  const ended = new Set<string>();
  const stkAnswers = new Map<string, string>();
  const fake: FakeDaraja = {
    answerStk: (msisdn, resultCode) => void stkAnswers.set(msisdn, resultCode),
    url: '', log: [], callbacks: [], tokenRequests: 0, expiresIn: 3599, callbackOrigin: '', callbackDelayMs: 30, stkQueryLagMs: 0, holdMs: 0, executions: new Map(), beforeStatusAnswer: null, oauthDown: false, loses: null,
    checkoutsFor: (msisdn) => [...payments.values()].filter((p) => p.kind === 'collection' && p.phone === msisdn).map((p) => p.key),
    payoutsTo: (reference) => fake.log.filter((r) => /\/(b2c\/v3|b2b\/v1)\/paymentrequest$/.test(r.path) && (r.body.OriginatorConversationID === reference || r.body.Occassion === reference)),
    resultFor: (reference) => (payments.has(reference) ? (resultCallback(payments.get(reference)!) as Record<string, any>) : null),
    stkCallbackFor: (checkout) => (payments.has(checkout) ? (stkCallback(payments.get(checkout)!) as Record<string, any>) : null),
    payLate: async (checkout) => {
      const p = payments.get(checkout)!;
      Object.assign(p, { resultCode: '0', resultDesc: 'The service request is processed successfully.', at: Date.now() });
      await post(p.callbackUrl!, stkCallback(p));
    },
    forgedStkSuccess: (checkout, change = {}) => {
      const p = payments.get(checkout)!;
      return stkCallback({ ...p, resultCode: '0', resultDesc: 'The service request is processed successfully.', receipt: receiptNo(), amount: change.amount ?? p.amount, phone: change.phone ?? p.phone }) as Record<string, any>;
    },
    endPayout: (reference, resultCode, resultDesc) => {
      const p = payments.get(reference)!;
      if (p.resultCode === '0' && resultCode !== '0') fake.executions.set(reference, (fake.executions.get(reference) ?? 1) - 1);
      Object.assign(p, { resultCode, resultDesc });
      ended.add(reference);
    },
    payoutResults: new Map(), payeeResults: new Map(),
    conversationsOf: (reference) => conversations.get(reference) ?? [],
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const conversations = new Map<string, string[]>();

  async function post(url: string, body: unknown, times = 1): Promise<void> {
    await delay(fake.callbackDelayMs);
    const target = new URL(url);
    const to = `${fake.callbackOrigin || target.origin}${target.pathname}`;
    if (fake.loses?.(to)) return;
    for (let i = 0; i < times; i++) {
      const res = await fetch(to, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).catch(() => null);
      fake.callbacks.push({ url: to, status: res?.status ?? 0, body: res ? await res.json().catch(() => null) : null });
    }
  }

  function stkCallback(p: Payment): unknown {
    const meta = p.resultCode === '0'
      ? {
          CallbackMetadata: {
            Item: [
              { Name: 'Amount', Value: p.amount }, { Name: 'MpesaReceiptNumber', Value: p.receipt }, { Name: 'Balance' },
              { Name: 'TransactionDate', Value: stamp() }, { Name: 'PhoneNumber', Value: Number(p.phone) },
            ],
          },
        }
      : {};
    return { Body: { stkCallback: { MerchantRequestID: p.conversationId, CheckoutRequestID: p.key, ResultCode: Number(p.resultCode), ResultDesc: p.resultDesc, ...meta } } };
  }

  function resultCallback(p: Payment): unknown {
    const paid = p.resultCode === '0';
    return {
      Result: {
        ResultType: 0, ResultCode: Number(p.resultCode), ResultDesc: p.resultDesc, OriginatorConversationID: p.originator, ConversationID: p.conversationId,
        TransactionID: paid ? p.receipt : 'TK61000000',
        ...(paid ? {
          ResultParameters: {
            ResultParameter: [
              { Key: 'TransactionAmount', Value: p.amount }, { Key: 'TransactionReceipt', Value: p.receipt }, { Key: 'B2CRecipientIsRegisteredCustomer', Value: 'Y' },
              { Key: 'B2CChargesPaidAccountAvailableFunds', Value: -4510.0 }, { Key: 'ReceiverPartyPublicName', Value: '2547****** - Amina W' },
              { Key: 'TransactionCompletedDateTime', Value: '25.11.2026 10:54:57' }, { Key: 'B2CUtilityAccountAvailableFunds', Value: 10116.0 },
              { Key: 'B2CWorkingAccountAvailableFunds', Value: 900000.0 },
            ],
          },
        } : {}),
        ReferenceData: { ReferenceItem: { Key: 'QueueTimeoutURL', Value: 'https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit' } },
      },
    };
  }

  /** A Transaction Status result: the request's state if M-Pesa knows it, else 2032; ReferenceItem echoes Occasion. */
  function statusResult(query: Record<string, any>, queryId: string, p: Payment | undefined): unknown {
    const occasion = query.Occasion ? { Key: 'Occasion', Value: query.Occasion } : { Key: 'Occasion' };
    if (!p) {
      return {
        Result: {
          ResultType: 0, ResultCode: 2032, ResultDesc: 'The transaction could not be found.', OriginatorConversationID: queryId,
          ConversationID: `AG_${randomUUID().replace(/-/g, '').slice(0, 20)}`, TransactionID: 'TK61000000', ReferenceData: { ReferenceItem: { Key: 'Occasion' } },
        },
      };
    }
    const completed = p.resultCode === '0';
    return {
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: queryId,
        ConversationID: `AG_${randomUUID().replace(/-/g, '').slice(0, 20)}`, TransactionID: completed ? p.receipt : 'TK61000000',
        ResultParameters: {
          ResultParameter: [
            { Key: 'ReceiptNo', Value: p.receipt }, { Key: 'Conversation ID', Value: p.conversationId }, { Key: 'FinalisedTime', Value: stamp() },
            { Key: 'Amount', Value: p.amount }, { Key: 'TransactionStatus', Value: completed ? 'Completed' : 'Failed' }, { Key: 'ReasonType', Value: 'Business Payment via API' },
            ...(completed ? [] : [{ Key: 'TransactionReasonCode', Value: p.resultCode }]),
            { Key: 'TransactionReason' }, { Key: 'DebitPartyCharges', Value: 'Fee For B2C Payment|KES|33.00' }, { Key: 'DebitAccountType', Value: 'Utility Account' },
            { Key: 'InitiatedTime', Value: stamp() }, { Key: 'Originator Conversation ID', Value: p.originator }, { Key: 'CreditPartyName', Value: '2547****** - Amina W' },
            { Key: 'DebitPartyName', Value: '600981 - Rampway' },
          ],
        },
        ReferenceData: { ReferenceItem: occasion },
      },
    };
  }

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url!, 'http://fake');
    const send = (status: number, body: unknown) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'GET' && url.pathname === '/oauth/v1/generate') {
      fake.tokenRequests++;
      if (fake.oauthDown) return send(503, { message: 'Service Unavailable' });
      const basic = Buffer.from(`${credentials.key}:${credentials.secret}`).toString('base64');
      if (req.headers.authorization !== `Basic ${basic}` || url.searchParams.get('grant_type') !== 'client_credentials') return send(400, { errorCode: '400.008.01', errorMessage: 'Invalid Authentication passed' });
      const token = `fake-token-${randomUUID()}`;
      issued.set(token, Date.now() + fake.expiresIn * 1000);
      await delay(20); // slow enough that concurrent callers would each ask, were they not sharing one request
      return send(200, { access_token: token, expires_in: String(fake.expiresIn) });
    }
    const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    if (!(issued.get(token)! > Date.now())) return send(401, { requestId: randomUUID(), errorCode: '404.001.03', errorMessage: 'Invalid Access Token' });
    const body = await readJson(req);
    fake.log.push({ path: url.pathname, body, at: Date.now() });

    if (url.pathname === '/mpesa/stkpush/v1/processrequest') {
      const expected = Buffer.from(`${credentials.shortcode}${credentials.passkey}${body.Timestamp}`).toString('base64');
      if (body.Password !== expected || !Number.isInteger(body.Amount)) return send(400, { errorCode: '400.002.02', errorMessage: 'Bad Request - Invalid Password or Amount' });
      const suffix = last4(body.PhoneNumber);
      // 0067: like 0066 (our answer late), but the payer lets the prompt time out (1037); payLate pays it later.
      const chosen = stkAnswers.get(String(body.PhoneNumber));
      stkAnswers.delete(String(body.PhoneNumber));
      const code = chosen ?? { '0001': '1032', '0037': '1037', '0067': '1037' }[suffix] ?? '0';
      const p: Payment = {
        kind: 'collection', key: `ws_CO_${randomUUID().replace(/-/g, '')}`, resultCode: code, resultDesc: PUBLISHED_STK_RESULT_CODES[code] ?? 'The service request has failed.',
        conversationId: `29115-${randomUUID().slice(0, 8)}-1`, originator: '', receipt: receiptNo(), amount: body.Amount, phone: String(body.PhoneNumber), callbackUrl: body.CallBackURL,
        billReference: String(body.AccountReference ?? ''), at: Date.now(),
      };
      payments.set(p.key, p);
      // 0097: the payer pays, but the callback is lost on the way (and the answer below with it): only M-Pesa knows.
      if (suffix !== '0099' && suffix !== '0098' && suffix !== '0097') void post(body.CallBackURL, stkCallback(p), suffix === '0022' ? 2 : 1);
      // The prompt went out and the gateway failed on the way back: Daraja's own 500 body, or a bare 503.
      if (suffix === '0050' || suffix === '0097') return send(500, { requestId: randomUUID(), errorCode: '500.003.1001', errorMessage: 'Internal Server Error' });
      if (suffix === '0051') return send(503, { message: 'Service Unavailable' });
      // The prompt went out; our answer is late (the caller's request times out, once per reference).
      if ((suffix === '0066' || suffix === '0067') && fake.holdMs && !failedOnce.has(`stk-${body.AccountReference}`)) {
        failedOnce.add(`stk-${body.AccountReference}`);
        await delay(fake.holdMs);
      }
      send(200, { MerchantRequestID: p.conversationId, CheckoutRequestID: p.key, ResponseCode: '0', ResponseDescription: 'Success. Request accepted for processing', CustomerMessage: 'Success. Request accepted for processing' });
      return;
    }
    // Pull Transactions (Safaricom's reconciliation API): the shortcode's C2B payments between two dates, 100 a page.
    if (url.pathname === '/pulltransactions/v1/query') {
      if (String(body.ShortCode) !== credentials.shortcode) return send(400, { errorCode: '400.001', errorMessage: 'Invalid ShortCode' });
      const [from, to] = [pullDate(body.StartDate), pullDate(body.EndDate)];
      if (Number.isNaN(from) || Number.isNaN(to)) return send(400, { errorCode: '400.002.02', errorMessage: 'Bad Request - Invalid StartDate or EndDate' });
      const paid = [...payments.values()].filter((p) => p.kind === 'collection' && p.resultCode === '0' && p.at! >= from && p.at! <= to)
        .slice(Number(body.OffSetValue ?? 0), Number(body.OffSetValue ?? 0) + 100);
      if (!paid.length) return send(200, { ResponseRefID: randomUUID(), ResponseCode: '1001', ResponseMessage: 'No transactions available for the selected time period', Response: [[]] });
      return send(200, {
        ResponseRefID: randomUUID(), ResponseCode: '1000', ResponseMessage: 'Success',
        Response: [paid.map((p) => ({
          transactionId: p.receipt, trxDate: new Date(p.at!).toISOString().replace(/\.\d{3}Z$/, 'Z'), msisdn: Number(p.phone), sender: 'UNKNOWN',
          transactiontype: 'c2b-pay-bill-debit', billreference: p.billReference, amount: String(p.amount), organizationname: 'Rampway Test',
        }))],
      });
    }
    if (url.pathname === '/mpesa/stkpushquery/v1/query') {
      const p = payments.get(body.CheckoutRequestID);
      if (!p) return send(400, { errorCode: '400.002.02', errorMessage: 'Bad Request - Invalid CheckoutRequestID' });
      // A prompt M-Pesa keeps undecided: STK Query answers Daraja's "being processed" error for as long as it is asked.
      if (last4(p.phone ?? '') === '0098' || Date.now() < p.at! + fake.stkQueryLagMs) return send(500, { requestId: randomUUID(), errorCode: '500.001.1001', errorMessage: 'The transaction is being processed' });
      return send(200, { ResponseCode: '0', ResponseDescription: 'The service request has been accepted successsfully', MerchantRequestID: p.conversationId, CheckoutRequestID: p.key, ResultCode: p.resultCode, ResultDesc: p.resultDesc });
    }
    if (url.pathname === '/mpesa/b2c/v3/paymentrequest' || url.pathname === '/mpesa/b2b/v1/paymentrequest') {
      const b2c = url.pathname.includes('b2c');
      const party = String(body.PartyB);
      const suffix = last4(party);
      const ours = String(b2c ? body.OriginatorConversationID : body.Occassion);
      if (suffix === '0003' && !failedOnce.has(ours)) {
        failedOnce.add(ours);
        return send(503, { message: 'Service Unavailable' });
      }
      const shortOnce = suffix === '0001' && !failedOnce.has(ours);
      if (shortOnce) failedOnce.add(ours);
      const chosen = fake.payoutResults.get(ours)?.shift() ?? fake.payeeResults.get(party)?.shift();
      const code = chosen ?? (suffix === '0002' ? '2040' : shortOnce || suffix === '0011' ? '1' : '0');
      const p: Payment = {
        kind: 'payout', key: ours, resultCode: code, resultDesc: B2C_RESULT_CODES[code] ?? `Result code ${code}.`,
        conversationId: `AG_${randomUUID().replace(/-/g, '').slice(0, 20)}`, originator: b2c ? ours : `${randomUUID().slice(0, 5)}-${Date.now()}`, receipt: receiptNo(), amount: body.Amount,
      };
      payments.set(ours, p);
      conversations.set(ours, [...(conversations.get(ours) ?? []), p.conversationId]);
      if (code === '0') fake.executions.set(ours, (fake.executions.get(ours) ?? 0) + 1);
      if ((suffix === '0006' || suffix === '0007') && !failedOnce.has(ours)) {
        failedOnce.add(ours);
        return send(500, suffix === '0006' ? { message: 'Internal Server Error' } : { requestId: randomUUID(), errorCode: '500.003.1001', errorMessage: 'Internal Server Error' });
      }
      if (suffix === '0077' && fake.holdMs) await delay(fake.holdMs);
      send(200, { ConversationID: p.conversationId, OriginatorConversationID: p.originator, ResponseCode: '0', ResponseDescription: 'Accept the service request successfully.' });
      if (suffix === '0055') {
        void post(body.QueueTimeOutURL, {
          Result: { ResultType: 1, ResultCode: 1037, ResultDesc: 'The request timed out in the queue.', OriginatorConversationID: p.originator, ConversationID: p.conversationId, TransactionID: 'TK61000000' },
        });
      } else if (suffix !== '0099' && suffix !== '0088') void post(body.ResultURL, resultCallback(p));
      return;
    }
    if (url.pathname === '/mpesa/transactionstatus/v1/query') {
      const p = payments.get(body.OriginalConversationID);
      const queryId = `${randomUUID().slice(0, 5)}-${randomUUID().slice(0, 6)}-1`;
      const meanwhile = fake.beforeStatusAnswer;
      fake.beforeStatusAnswer = null;
      await meanwhile?.();
      send(200, { OriginatorConversationID: queryId, ConversationID: `AG_${randomUUID().replace(/-/g, '').slice(0, 20)}`, ResponseCode: '0', ResponseDescription: 'Accept the service request successfully.' });
      if (body.OriginalConversationID && !ended.has(body.OriginalConversationID) && fake.log.some((r) => r.body.OriginatorConversationID === body.OriginalConversationID && last4(r.body.PartyB) === '0088')) return;
      void post(body.ResultURL, statusResult(body, queryId, p));
      return;
    }
    send(404, { errorCode: '404.001.01', errorMessage: 'Resource not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** A rate source: `rate` and `ageMs` may change between calls; `requests` counts what was asked. */
export async function startFakeRates(): Promise<{ url: string; rate: string; ageMs: number; requests: number; close(): Promise<void> }> {
  const state = {
    url: '', rate: '129.35', ageMs: 1000, requests: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = createServer((req, res) => {
    state.requests++;
    const url = new URL(req.url!, 'http://rates');
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
      base: url.searchParams.get('base'), quote: url.searchParams.get('quote'), rate: state.rate, as_of: new Date(Date.now() - state.ageMs).toISOString(),
    }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
