// One HTTP call to a provider: bounded by a timeout, no redirects, the JSON body read when there is one. No answer
// (a timeout, a dropped connection) is a ProviderError the caller treats as "unknown", never as a refusal.
import { ProviderError } from './provider.js';

/** A provider's answer: the HTTP status and its JSON object body (null when it was not one). */
export interface ProviderAnswer {
  status: number;
  body: Record<string, any> | null;
}

export async function callProvider(name: string, url: string, init: RequestInit, timeoutMs: number): Promise<ProviderAnswer> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError';
    throw new ProviderError(timedOut ? `${name} did not answer within ${timeoutMs} ms.` : `${name} could not be reached.`, timedOut ? 'timeout' : 'network');
  }
  const text = await res.text().catch(() => '');
  let body: Record<string, any> | null = null;
  try {
    const parsed = JSON.parse(text);
    body = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : null;
  } catch {
    body = null;
  }
  return { status: res.status, body };
}
