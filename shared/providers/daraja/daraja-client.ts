// The HTTP half of the M-Pesa Daraja adapter: OAuth client-credentials tokens and the request endpoints, in
// Safaricom's published shapes. It knows nothing of our tables; daraja-provider.ts decides what to send and when.
// Credentials, passkeys and phone numbers never reach a log line or an error message from here.
import type { Config } from '../../config.js';
import { ProviderError } from '../provider.js';
import { TokenCache } from '../token-cache.js';
import { callProvider, type ProviderAnswer } from '../http.js';

export type DarajaSettings = Config['daraja'] & { publicBaseUrl: string };

/** A Daraja answer we read: the HTTP status and its JSON body (null when it was not JSON). */
export type DarajaAnswer = ProviderAnswer;

// One token per (base URL, consumer key) in the process (Daraja's are good for 3599 s).
const tokens = new TokenCache();

/** Tests: forget every cached token. */
export function forgetDarajaTokens(): void {
  tokens.clear();
}

/** yyyyMMddHHmmss in Kenya's time (UTC+3, no daylight saving), as STK Push and STK Query expect. */
export function darajaTimestamp(now = new Date()): string {
  const eat = new Date(now.getTime() + 3 * 3_600_000);
  return eat.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/** Pull Transactions' dates: `YYYY-MM-DD HH:mm:ss` in Nairobi time (UTC+3, no daylight saving), as its documentation shows them. */
export function nairobiTime(at: Date): string {
  return new Date(at.getTime() + 3 * 3_600_000).toISOString().replace('T', ' ').slice(0, 19);
}

/** STK Push's Password: base64(shortcode + passkey + timestamp). */
export function stkPassword(shortcode: string, passkey: string, timestamp: string): string {
  return Buffer.from(`${shortcode}${passkey}${timestamp}`, 'utf8').toString('base64');
}

export class DarajaClient {
  constructor(private readonly settings: DarajaSettings) {}

  /** Where Daraja posts a result: PUBLIC_BASE_URL + /providers/daraja/<token>/<kind>. */
  callbackUrl(kind: string): string {
    return `${this.settings.publicBaseUrl}/providers/daraja/${this.settings.callbackToken}/${kind}`;
  }

  get shortcode(): string {
    return this.settings.shortcode!;
  }

  stkPush(body: Record<string, unknown>): Promise<DarajaAnswer> {
    return this.post('/mpesa/stkpush/v1/processrequest', body);
  }

  stkQuery(checkoutRequestId: string): Promise<DarajaAnswer> {
    const timestamp = darajaTimestamp();
    return this.post('/mpesa/stkpushquery/v1/query', {
      BusinessShortCode: this.settings.shortcode, Password: stkPassword(this.settings.shortcode!, this.settings.passkey!, timestamp), Timestamp: timestamp,
      CheckoutRequestID: checkoutRequestId,
    });
  }

  /**
   * Pull Transactions (M-Pesa's reconciliation API): the shortcode's C2B payments of the last 48 hours between two
   * moments, a page of them from `offset`. What M-Pesa collected whether or not its callback reached us.
   */
  pullTransactions(from: Date, to: Date, offset = 0): Promise<DarajaAnswer> {
    return this.post('/pulltransactions/v1/query', { ShortCode: this.settings.shortcode, StartDate: nairobiTime(from), EndDate: nairobiTime(to), OffSetValue: String(offset) });
  }

  stkPassword(timestamp: string): string {
    return stkPassword(this.settings.shortcode!, this.settings.passkey!, timestamp);
  }

  /** B2C v3: OriginatorConversationID is our transaction id, so Daraja and we name the payout alike. */
  b2c(body: Record<string, unknown>): Promise<DarajaAnswer> {
    return this.post('/mpesa/b2c/v3/paymentrequest', { ...this.initiator(), PartyA: this.settings.b2cShortcode, ...body });
  }

  b2b(body: Record<string, unknown>): Promise<DarajaAnswer> {
    return this.post('/mpesa/b2b/v1/paymentrequest', { ...this.initiator(), PartyA: this.settings.b2cShortcode, SenderIdentifierType: '4', ...body });
  }

  /** Asynchronous in Daraja: the answer only acknowledges the query; the status comes to the `status` callback. */
  transactionStatus(reference: string): Promise<DarajaAnswer> {
    return this.post('/mpesa/transactionstatus/v1/query', {
      ...this.initiator(), CommandID: 'TransactionStatusQuery', OriginalConversationID: reference, TransactionID: '', PartyA: this.settings.b2cShortcode,
      IdentifierType: '4', ResultURL: this.callbackUrl('status'), QueueTimeOutURL: this.callbackUrl('timeout'), Remarks: 'status', Occasion: reference,
    });
  }

  private initiator(): Record<string, unknown> {
    return { InitiatorName: this.settings.initiatorName, Initiator: this.settings.initiatorName, SecurityCredential: this.settings.securityCredential };
  }

  /** A request with a valid token; a 401 (a token Daraja dropped early) is retried once with a new one. */
  private async post(path: string, body: Record<string, unknown>): Promise<DarajaAnswer> {
    for (let attempt = 1; ; attempt++) {
      const token = await this.token();
      const answer = await this.send(path, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      if (answer.status === 401 && attempt === 1) {
        tokens.drop(this.cacheKey, token);
        continue;
      }
      if (answer.status >= 500 && !isProviderAnswer(answer)) throw new ProviderError(`M-Pesa answered HTTP ${answer.status}.`, String(answer.status));
      return answer;
    }
  }

  private get cacheKey(): string {
    return `${this.settings.baseUrl}|${this.settings.consumerKey}`;
  }

  /** The cached token, or one new token request however many callers wait for it. */
  token(): Promise<string> {
    return tokens.get(this.cacheKey, () => this.requestToken());
  }

  private async requestToken(): Promise<{ token: string; expiresIn: number }> {
    const basic = Buffer.from(`${this.settings.consumerKey}:${this.settings.consumerSecret}`, 'utf8').toString('base64');
    const answer = await this.send('/oauth/v1/generate?grant_type=client_credentials', { method: 'GET', headers: { Authorization: `Basic ${basic}` } });
    const token = answer.body?.access_token;
    const expiresIn = Number(answer.body?.expires_in);
    if (answer.status !== 200 || typeof token !== 'string' || token === '' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
      // Wrong credentials are an operator's problem that retrying later may see fixed: temporary, never a payee's refusal.
      throw new ProviderError(`M-Pesa refused the OAuth token request (HTTP ${answer.status}).`, 'oauth');
    }
    return { token, expiresIn };
  }

  private send(path: string, init: RequestInit): Promise<DarajaAnswer> {
    return callProvider('M-Pesa', `${this.settings.baseUrl}${path}`, init, this.settings.requestTimeoutMs);
  }
}

/** A 5xx that carries Daraja's own error code (500.001.1001 "being processed") is an answer to read, not an outage. */
function isProviderAnswer(answer: DarajaAnswer): boolean {
  return typeof answer.body?.errorCode === 'string';
}
