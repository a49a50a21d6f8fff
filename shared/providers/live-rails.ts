// Which live provider serves a corridor and network (CONTRACT §13, §17): M-Pesa Daraja keeps its KES corridors; MTN
// MoMo serves mobile money on the `mtn` network in each currency of MOMO_CURRENCIES. Quotes, ramps, intents, the
// corridor list and the provider choice all ask here, so they never disagree.
import type { Config } from '../config.js';
import { MOMO_NETWORK } from '../config-momo.js';
import { AppError } from '../errors.js';
import { corridorError, getCorridor, listCorridors, type Corridor } from '../domain/corridors.js';

export type LiveProviderId = 'mpesa_daraja' | 'mtn_momo';

const networksOf = (c: Corridor): readonly string[] => c.fields.find((f) => f.name === 'mobile_network')?.enum ?? [];

/** Whether MTN MoMo serves this currency's mobile money live (MOMO_CURRENCIES). */
export function momoServes(config: Config, currency: string): boolean {
  return config.momo.currencies.includes(currency);
}

/** The networks of a corridor live keys can use (all of them for Daraja; `mtn` for MoMo); empty when none. */
export function liveNetworks(config: Config, corridor: Corridor): string[] {
  if (corridor.provider === 'mpesa_daraja') return [...networksOf(corridor)];
  if (corridor.payment_method === 'mobile_money' && momoServes(config, corridor.currency)) return networksOf(corridor).filter((n) => n === MOMO_NETWORK);
  return [];
}

/** Whether a live provider serves the corridor (on at least one of its networks). */
export function liveAvailable(config: Config, corridor: Corridor): boolean {
  return corridor.provider === 'mpesa_daraja' || liveNetworks(config, corridor).length > 0;
}

/** The currencies a live provider serves (their rates are kept fresh ahead of need); none without a rate source. */
export function liveCurrencies(config: Config): string[] {
  if (!config.rateSourceUrl) return [];
  return [...new Set(listCorridors().filter((c) => liveAvailable(config, c)).map((c) => c.currency))].sort();
}

/** The live provider for a corridor; `network` (when known) must be one it serves. Null: none. */
export function liveProviderOf(config: Config, currency: string, paymentMethod: string, network?: string | null): LiveProviderId | null {
  const corridor = getCorridor(currency, paymentMethod);
  if (!corridor || !liveAvailable(config, corridor)) return null;
  if (corridor.provider === 'mpesa_daraja') return 'mpesa_daraja';
  return network == null || liveNetworks(config, corridor).includes(network) ? 'mtn_momo' : null;
}

/** The live provider, or 422 unsupported_corridor `no_live_provider` naming the networks live keys can use. */
export function requireLiveProvider(config: Config, currency: string, paymentMethod: string, network?: string | null): LiveProviderId {
  const provider = liveProviderOf(config, currency, paymentMethod, network);
  if (provider) return provider;
  const corridor = getCorridor(currency, paymentMethod);
  const networks = corridor ? liveNetworks(config, corridor) : [];
  if (network && networks.length) {
    throw corridorError('unsupported_corridor', `Live ${currency} mobile money runs on ${networks.join(', ')}, not ${network}.`, { reason: 'no_live_provider', mobile_network: network, live_networks: networks });
  }
  throw corridorError('unsupported_corridor', `${currency} has no live provider yet.`, { reason: 'no_live_provider' });
}

/** How long a request waits for its callback before its provider is asked about it. */
export function statusQueryAfterMs(config: Config, currency: string): number {
  return momoServes(config, currency) ? config.momo.statusQueryAfterMs : config.daraja.statusQueryAfterMs;
}
