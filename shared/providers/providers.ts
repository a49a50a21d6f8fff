// The composition root of the fiat rails: which adapter serves an environment and currency, each call instrumented.
// Apart from provider.ts (the port: the interface and its types), which the adapters themselves import.
import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import type { Environment } from '../domain/chains.js';
import { SandboxProvider } from './sandbox-provider.js';
import { DarajaProvider } from './daraja/daraja-provider.js';
import { DarajaClient } from './daraja/daraja-client.js';
import { MomoProvider } from './momo/momo-provider.js';
import { MomoClient } from './momo/momo-client.js';
import { momoServes, requireLiveProvider, type LiveProviderId } from './live-rails.js';
import { providerDuration, providerErrors, timed } from '../metrics.js';
import type { PaymentProvider, ProviderDeps, ProviderOutcome } from './provider.js';

/** Every provider, whichever the environment picks, with each call's latency and errors recorded. */
function instrumented(provider: PaymentProvider): PaymentProvider {
  const record = (operation: string) => (seconds: number, outcome: string) => {
    providerDuration.observe({ provider: provider.id, operation, outcome }, seconds);
    if (outcome === 'error') providerErrors.inc({ provider: provider.id, operation });
  };
  const statusOf = (o: ProviderOutcome | null) => o?.status ?? 'unknown';
  // Built on the provider itself: everything else (its id, parseCallback, instanceof) is the provider's own.
  const calls: Pick<PaymentProvider, 'collect' | 'payout' | 'queryStatus'> = {
    collect: (req) => timed(record('collect'), () => provider.collect(req), statusOf),
    payout: (req) => timed(record('payout'), () => provider.payout(req), statusOf),
    queryStatus: (kind, reference, providerReference) => timed(record('query_status'), () => provider.queryStatus(kind, reference, providerReference), statusOf),
  };
  return Object.assign(Object.create(provider) as PaymentProvider, calls);
}

/**
 * The adapter that serves an environment and currency: sandbox simulates; live picks MTN MoMo for a currency of
 * MOMO_CURRENCIES, else M-Pesa Daraja (which serves KES only).
 */
export function providerFor(environment: Environment, deps: ProviderDeps, currency: string): PaymentProvider {
  return instrumented(chooseProvider(environment, deps, currency));
}

/**
 * A ramp or collection needs its provider before anything is consumed: live, 422 `no_live_provider` for a corridor or
 * network no live provider serves, 503 while its adapter is not configured.
 */
export function assertProvider(environment: Environment, deps: ProviderDeps, currency: string, paymentMethod: string, network?: string | null): void {
  if (environment === 'live' && deps.config) requireLiveProvider(deps.config, currency, paymentMethod, network);
  providerFor(environment, deps, currency);
}

/** Live: 503 before anything is read while no live provider at all is configured (neither Daraja nor MoMo). */
export function assertSomeProvider(environment: Environment, config: Config): void {
  if (environment === 'live' && !config.daraja.consumerKey && !config.momo.collection.apiUser) {
    throw AppError.unavailable('No live mobile-money provider is configured on this deployment (DARAJA_CONSUMER_KEY, MOMO_COLLECTION_API_USER).', 60);
  }
}

/** A live adapter by its id (a stored callback names its provider). */
export function liveProvider(id: LiveProviderId, deps: ProviderDeps): PaymentProvider {
  return instrumented(id === 'mtn_momo' ? momo(deps) : daraja(deps));
}

function daraja(deps: ProviderDeps): PaymentProvider {
  // Boot refuses a half-configured rail (config.ts), so one credential stands for all of them.
  const config = deps.config;
  if (!config?.daraja.consumerKey) throw AppError.unavailable('No live mobile-money provider is configured on this deployment (DARAJA_CONSUMER_KEY).', 60);
  return new DarajaProvider(deps, new DarajaClient({ ...config.daraja, publicBaseUrl: config.publicBaseUrl }));
}

function momo(deps: ProviderDeps): PaymentProvider {
  const config = deps.config;
  if (!config?.momo.collection.apiUser) throw AppError.unavailable('MTN MoMo is not configured on this deployment (MOMO_COLLECTION_API_USER).', 60);
  return new MomoProvider(deps, new MomoClient({ ...config.momo, publicBaseUrl: config.publicBaseUrl }), config.momo);
}

function chooseProvider(environment: Environment, deps: ProviderDeps, currency: string): PaymentProvider {
  switch (environment) {
    case 'sandbox':
      return new SandboxProvider(deps);
    case 'live':
      return deps.config && momoServes(deps.config, currency) ? momo(deps) : daraja(deps);
    default:
      // A value from outside the type (a bad job payload) must not fall through to a simulation.
      throw AppError.unavailable('No provider is configured for this environment.');
  }
}
