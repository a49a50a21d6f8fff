// The HTTP half of the MTN MoMo adapter, in MTN's published Open API shapes (CONTRACT §17): a token per product
// (`POST /<product>/token/`, Basic api user:api key and the product's Ocp-Apim-Subscription-Key, reused until
// expires_in), `POST /collection/v1_0/requesttopay` and `POST /disbursement/v1_0/transfer` (X-Reference-Id,
// X-Target-Environment, X-Callback-Url; answered 202 with no body), and their status GETs. It knows nothing of our
// tables: momo-provider.ts decides what to send and when. Keys and phone numbers never reach a log line from here.
import type { MomoSettings } from '../../config-momo.js';
import { ProviderError, type ProviderKind } from '../provider.js';
import { callProvider, type ProviderAnswer } from '../http.js';
import { TokenCache } from '../token-cache.js';

export type MomoProduct = 'collection' | 'disbursement';
export type MomoClientSettings = MomoSettings & { publicBaseUrl: string };

export const productOf = (kind: ProviderKind): MomoProduct => (kind === 'collection' ? 'collection' : 'disbursement');

const PATHS: Record<MomoProduct, string> = { collection: '/collection/v1_0/requesttopay', disbursement: '/disbursement/v1_0/transfer' };

const tokens = new TokenCache();

/** Tests: forget every cached token. */
export function forgetMomoTokens(): void {
  tokens.clear();
}

export class MomoClient {
  constructor(private readonly settings: MomoClientSettings) {}

  /** Where MTN sends a result: PUBLIC_BASE_URL + /providers/momo/<token>/<kind>. */
  callbackUrl(kind: ProviderKind): string {
    return `${this.settings.publicBaseUrl}/providers/momo/${this.settings.callbackToken}/${kind}`;
  }

  /** requesttopay or transfer under `referenceId` (MTN's idempotency key): 202 accepted, 409 already known. */
  request(kind: ProviderKind, referenceId: string, body: Record<string, unknown>): Promise<ProviderAnswer> {
    const product = productOf(kind);
    return this.call(product, 'POST', PATHS[product], {
      'X-Reference-Id': referenceId, 'X-Callback-Url': this.callbackUrl(kind), 'Content-Type': 'application/json',
    }, JSON.stringify(body));
  }

  /** GET requesttopay/{id} or transfer/{id}: 200 with the request's status, 404 when MTN has no record of it. */
  status(kind: ProviderKind, referenceId: string): Promise<ProviderAnswer> {
    const product = productOf(kind);
    return this.call(product, 'GET', `${PATHS[product]}/${encodeURIComponent(referenceId)}`, {});
  }

  /** The product's cached token, or one new token request however many callers wait for it. */
  token(product: MomoProduct): Promise<string> {
    return tokens.get(this.cacheKey(product), () => this.requestToken(product));
  }

  private cacheKey(product: MomoProduct): string {
    return `${this.settings.baseUrl}|${product}|${this.settings[product].apiUser}`;
  }

  private async requestToken(product: MomoProduct): Promise<{ token: string; expiresIn: number }> {
    const { apiUser, apiKey, subscriptionKey } = this.settings[product];
    const basic = Buffer.from(`${apiUser}:${apiKey}`, 'utf8').toString('base64');
    const answer = await callProvider('MTN MoMo', `${this.settings.baseUrl}/${product}/token/`, {
      method: 'POST', headers: { Authorization: `Basic ${basic}`, 'Ocp-Apim-Subscription-Key': subscriptionKey! },
    }, this.settings.requestTimeoutMs);
    const token = answer.body?.access_token;
    const expiresIn = Number(answer.body?.expires_in);
    if (answer.status !== 200 || typeof token !== 'string' || token === '' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
      // Wrong credentials are an operator's problem that retrying later may see fixed: temporary, never a refusal.
      throw new ProviderError(`MTN MoMo refused the ${product} token request (HTTP ${answer.status}).`, 'oauth');
    }
    return { token, expiresIn };
  }

  /** A call with a valid token; a 401 (a token MTN dropped early) is retried once with a new one. */
  private async call(product: MomoProduct, method: string, path: string, headers: Record<string, string>, body?: string): Promise<ProviderAnswer> {
    for (let attempt = 1; ; attempt++) {
      const token = await this.token(product);
      const answer = await callProvider('MTN MoMo', `${this.settings.baseUrl}${path}`, {
        method, body,
        headers: { ...headers, Authorization: `Bearer ${token}`, 'X-Target-Environment': this.settings.targetEnvironment, 'Ocp-Apim-Subscription-Key': this.settings[product].subscriptionKey! },
      }, this.settings.requestTimeoutMs);
      if (answer.status === 401 && attempt === 1) {
        tokens.drop(this.cacheKey(product), token);
        continue;
      }
      return answer;
    }
  }
}
