// One OAuth token per provider account in the process, shared by every job: providers rate-limit token requests, and
// a token is good for its expires_in. Concurrent callers share one request; a token is renewed a little early.

interface CachedToken {
  token: string;
  expiresAt: number;
}

/** Renew a little early, so a token never expires between our check and the provider's. */
const EARLY_RENEWAL_MS = 30_000;

export class TokenCache {
  private readonly tokens = new Map<string, CachedToken>();
  private readonly pending = new Map<string, Promise<CachedToken>>();

  /** The cached token for `key`, or one new request (`request` answers the token and its lifetime in seconds). */
  async get(key: string, request: () => Promise<{ token: string; expiresIn: number }>): Promise<string> {
    const cached = this.tokens.get(key);
    if (cached && cached.expiresAt > Date.now()) return cached.token;
    let asked = this.pending.get(key);
    if (!asked) {
      asked = request()
        .then(({ token, expiresIn }) => {
          const entry = { token, expiresAt: Date.now() + Math.max(expiresIn * 1000 - EARLY_RENEWAL_MS, 1000) };
          this.tokens.set(key, entry);
          return entry;
        })
        .finally(() => this.pending.delete(key));
      this.pending.set(key, asked);
    }
    return (await asked).token;
  }

  /** A token the provider refused (401) is dropped, unless a newer one replaced it already. */
  drop(key: string, token: string): void {
    if (this.tokens.get(key)?.token === token) this.tokens.delete(key);
  }

  clear(): void {
    this.tokens.clear();
    this.pending.clear();
  }
}
