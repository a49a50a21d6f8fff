import type { Address } from 'viem';
import type { Config } from '../../shared/config.js';
import { erc20Abi } from 'viem';
import { publicClientFor } from '../../shared/chain/clients.js';
import { CHAIN_IDS, type Chain } from '../../shared/domain/chains.js';
import { listCorridors } from '../../shared/domain/corridors.js';
import { httpRateSource } from '../../shared/domain/rates.js';
import { liveProviderOf, type LiveProviderId } from '../../shared/providers/live-rails.js';
import { ref, type JsonSchema, type RouteDef } from './route.js';

// GET /onramps/readiness (CONTRACT §13): what a live on-ramp needs. It quotes nothing, calls no payment provider
// and writes nothing; its only outside calls are bounded reads of the chain and the rate source. Messages name
// variables, never their values (an RPC URL or a token can carry a secret).

interface Check { ok: boolean; message: string | null }
type Checks = Record<string, Check>;

const CHAIN: Chain = 'base';
/** Each outside look (the chain, the rate source) is bounded, then reused for a few seconds. */
const OUTSIDE_CHECK_TIMEOUT_MS = 2_000;
const OUTSIDE_CHECK_CACHE_MS = 5_000;
const CALLBACK_TOKEN_RE = /^[A-Za-z0-9_-]{16,200}$/;

const pass: Check = { ok: true, message: null };
const fail = (message: string): Check => ({ ok: false, message });
const unset = (names: string[]): Check => fail(`${names.join(', ')} ${names.length === 1 ? 'is' : 'are'} not set.`);

/**
 * The live providers whose checks are listed: MTN MoMo once configured (MOMO_CURRENCIES); M-Pesa Daraja once
 * configured, or when no provider is (its checks then name what is missing).
 */
function liveRails(config: Config): LiveProviderId[] {
  const momo = config.momo.currencies.length > 0;
  return [...(config.daraja.consumerKey || !momo ? ['mpesa_daraja' as const] : []), ...(momo ? ['mtn_momo' as const] : [])];
}

/** Fiat currencies with an on-ramp corridor; in live, only those a listed live provider serves. */
function onrampCurrencies(config: Config, live: boolean): string[] {
  const rails = liveRails(config);
  const corridors = listCorridors().filter((c) => {
    if (!c.directions.includes('onramp')) return false;
    const provider = live ? liveProviderOf(config, c.currency, c.payment_method) : null;
    return !live || (provider !== null && rails.includes(provider));
  });
  return [...new Set(corridors.map((c) => c.currency))];
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

// Readiness is polled: an outside answer is reused for a few seconds rather than asked on every request.
const answers = new Map<string, { expires: number; value: Promise<Check> }>();

function cached(key: string, ask: () => Promise<Check>): Promise<Check> {
  const now = Date.now();
  const hit = answers.get(key);
  if (hit && hit.expires > now) return hit.value;
  for (const [k, entry] of answers) if (entry.expires <= now) answers.delete(k);
  const value = ask(); // never rejects: every failure is a check that is not ok
  answers.set(key, { expires: now + OUTSIDE_CHECK_CACHE_MS, value });
  return value;
}

async function askChain(config: Config): Promise<Check> {
  const upper = CHAIN.toUpperCase();
  const token = config.chains[CHAIN].usdcAddress as Address;
  const client = publicClientFor(config, CHAIN);
  try {
    const [chainId, code] = await withTimeout(Promise.all([client.getChainId(), client.getCode({ address: token })]), OUTSIDE_CHECK_TIMEOUT_MS);
    if (chainId !== CHAIN_IDS[CHAIN]) return fail(`RPC_URL_${upper} serves chain id ${chainId}, not ${CHAIN} (${CHAIN_IDS[CHAIN]}).`);
    if (!code || code === '0x') return fail(`USDC_ADDRESS_${upper} (${token}) holds no contract on ${CHAIN}.`);
    return pass;
  } catch {
    return fail(`The ${CHAIN} RPC (RPC_URL_${upper}) did not answer within ${OUTSIDE_CHECK_TIMEOUT_MS / 1000} s.`);
  }
}

/** The chain's RPC is configured, answers with the right chain id, and the USDC address holds a contract. */
function chainCheck(config: Config): Promise<Check> {
  const { rpcUrl, usdcAddress } = config.chains[CHAIN];
  // Live never falls back to viem's public RPC: it is rate limited and no place to settle money through.
  if (!rpcUrl) return Promise.resolve(fail(`RPC_URL_${CHAIN.toUpperCase()} is not set.`));
  return cached(`chain|${rpcUrl}|${usdcAddress}`, () => askChain(config));
}

async function askTreasury(config: Config, holder: `0x${string}`): Promise<Check> {
  const client = publicClientFor(config, CHAIN);
  try {
    const [usdc, gas] = await withTimeout(Promise.all([
      client.readContract({ address: config.chains[CHAIN].usdcAddress as Address, abi: erc20Abi, functionName: 'balanceOf', args: [holder] }),
      client.getBalance({ address: holder }),
    ]), OUTSIDE_CHECK_TIMEOUT_MS);
    const empty = [...(usdc > 0n ? [] : ['USDC']), ...(gas > 0n ? [] : ['gas'])];
    return empty.length ? fail(`The treasury hot wallet (${holder}) holds no ${empty.join(' and no ')} on ${CHAIN}: live on-ramps deliver from it.`) : pass;
  } catch {
    return fail(`The treasury hot wallet's balances on ${CHAIN} could not be read within ${OUTSIDE_CHECK_TIMEOUT_MS / 1000} s.`);
  }
}

/** The live treasury hot wallet (WALLET_TREASURY_ADDRESS_LIVE) holds USDC to deliver and gas to send it with. */
function treasuryCheck(config: Config): Promise<Check> {
  const holder = config.wallets.live?.treasuryAddress;
  if (!holder) return Promise.resolve(fail('WALLET_XPUB_LIVE and WALLET_TREASURY_ADDRESS_LIVE are not set: there is no treasury hot wallet to deliver USDC from.'));
  if (!config.chains[CHAIN].rpcUrl) return Promise.resolve(fail(`RPC_URL_${CHAIN.toUpperCase()} is not set: the treasury hot wallet's balances cannot be read.`));
  return cached(`treasury|${config.chains[CHAIN].rpcUrl}|${config.chains[CHAIN].usdcAddress}|${holder}`, () => askTreasury(config, holder));
}

async function askRateSource(config: Config, url: string, currency: string): Promise<Check> {
  try {
    const quote = await withTimeout(httpRateSource(url, OUTSIDE_CHECK_TIMEOUT_MS).rate(currency), OUTSIDE_CHECK_TIMEOUT_MS);
    const ageSeconds = Math.floor((Date.now() - Date.parse(quote.as_of)) / 1000);
    if (ageSeconds > config.rateMaxAgeSeconds) {
      return fail(`The rate source's ${currency} rate is ${ageSeconds} s old; RATE_MAX_AGE_SECONDS allows ${config.rateMaxAgeSeconds} s.`);
    }
    return pass;
  } catch {
    return fail(`The rate source (RATE_SOURCE_URL) gave no usable ${currency} rate within ${OUTSIDE_CHECK_TIMEOUT_MS / 1000} s.`);
  }
}

/** The rate source answers every live on-ramp currency with a fresh rate. */
async function rateSourceCheck(config: Config, currencies: string[]): Promise<Check> {
  const url = config.rateSourceUrl;
  if (!url) return unset(['RATE_SOURCE_URL']);
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) return fail('RATE_SOURCE_URL is not an absolute http(s) URL.');
  const results = await Promise.all(currencies.map((currency) => cached(`rate|${url}|${currency}`, () => askRateSource(config, url, currency))));
  return results.find((r) => !r.ok) ?? pass;
}

function darajaCredentialsCheck(config: Config): Check {
  const d = config.daraja;
  const missing = Object.entries({
    DARAJA_CONSUMER_KEY: d.consumerKey, DARAJA_CONSUMER_SECRET: d.consumerSecret, DARAJA_SHORTCODE: d.shortcode, DARAJA_PASSKEY: d.passkey,
    DARAJA_B2C_SHORTCODE: d.b2cShortcode, DARAJA_INITIATOR_NAME: d.initiatorName, DARAJA_SECURITY_CREDENTIAL: d.securityCredential,
  })
    .filter(([, value]) => !value)
    .map(([name]) => name);
  return missing.length ? unset(missing) : pass;
}

function momoCredentialsCheck(config: Config): Check {
  const { collection, disbursement } = config.momo;
  const missing = Object.entries({
    MOMO_COLLECTION_SUBSCRIPTION_KEY: collection.subscriptionKey, MOMO_COLLECTION_API_USER: collection.apiUser, MOMO_COLLECTION_API_KEY: collection.apiKey,
    MOMO_DISBURSEMENT_SUBSCRIPTION_KEY: disbursement.subscriptionKey, MOMO_DISBURSEMENT_API_USER: disbursement.apiUser, MOMO_DISBURSEMENT_API_KEY: disbursement.apiKey,
  })
    .filter(([, value]) => !value)
    .map(([name]) => name);
  return missing.length ? unset(missing) : pass;
}

/** Whether the provider can reach the URL is not checked: only that there is one to hand it. */
function callbackUrlCheck(config: Config, tokenName: string, token: string | null): Check {
  const missing = [...(config.publicBaseUrlConfigured ? [] : ['PUBLIC_BASE_URL']), ...(token ? [] : [tokenName])];
  if (missing.length) return unset(missing);
  if (!CALLBACK_TOKEN_RE.test(token!)) return fail(`${tokenName} must be 16 to 200 characters of A-Z, a-z, 0-9, _ and - (it is a URL path segment).`);
  return pass;
}

async function liveChecks(config: Config, currencies: string[]): Promise<Checks> {
  const [chain, rates, treasury] = await Promise.all([chainCheck(config), rateSourceCheck(config, currencies), treasuryCheck(config)]);
  const rails = liveRails(config);
  return {
    chain_rpc: chain,
    treasury_wallet: treasury,
    ...(rails.includes('mpesa_daraja') ? { daraja_credentials: darajaCredentialsCheck(config), callback_url: callbackUrlCheck(config, 'DARAJA_CALLBACK_TOKEN', config.daraja.callbackToken) } : {}),
    ...(rails.includes('mtn_momo') ? { momo_credentials: momoCredentialsCheck(config), momo_callback_url: callbackUrlCheck(config, 'MOMO_CALLBACK_TOKEN', config.momo.callbackToken) } : {}),
    rate_source: rates,
  };
}

export const schemas: Record<string, JsonSchema> = {
  ReadinessCheck: {
    type: 'object',
    required: ['ok', 'message'],
    properties: {
      ok: { type: 'boolean' },
      message: { type: ['string', 'null'], description: 'What is missing or wrong; null when ok. Names configuration, never its values.' },
    },
  },
  OnrampReadiness: {
    type: 'object',
    required: ['environment', 'enabled', 'provider', 'providers', 'chain', 'asset', 'currencies', 'checks'],
    properties: {
      environment: ref('Environment'),
      enabled: { type: 'boolean', description: 'Every check is ok: on-ramps can be created with this key\'s environment.' },
      provider: { type: 'string', enum: ['sandbox', 'mpesa_daraja', 'mtn_momo'], description: 'Who collects the fiat payment (live: the first of `providers`).' },
      providers: {
        type: 'array', items: { type: 'string', enum: ['sandbox', 'mpesa_daraja', 'mtn_momo'] },
        description: 'Every provider whose checks are listed: live, M-Pesa Daraja (KES) and MTN MoMo (MOMO_CURRENCIES, network `mtn`) once configured.',
      },
      chain: ref('Chain'),
      asset: { type: 'string', enum: ['USDC'] },
      currencies: { type: 'array', items: { type: 'string' }, description: 'Fiat currencies an on-ramp can collect in this environment.' },
      checks: {
        type: 'object',
        additionalProperties: ref('ReadinessCheck'),
        description: 'Live: `chain_rpc` (RPC_URL_BASE answers with chain id 8453 and USDC_ADDRESS_BASE holds a contract), `treasury_wallet` (the live treasury hot wallet, WALLET_TREASURY_ADDRESS_LIVE, holds USDC and gas on base), ' +
          '`daraja_credentials` (DARAJA_CONSUMER_KEY, DARAJA_CONSUMER_SECRET, DARAJA_SHORTCODE, DARAJA_PASSKEY, DARAJA_B2C_SHORTCODE, DARAJA_INITIATOR_NAME, DARAJA_SECURITY_CREDENTIAL), `callback_url` (PUBLIC_BASE_URL and DARAJA_CALLBACK_TOKEN), ' +
          '`momo_credentials` (MOMO_COLLECTION_SUBSCRIPTION_KEY, MOMO_COLLECTION_API_USER, MOMO_COLLECTION_API_KEY and their MOMO_DISBURSEMENT_ twins) and `momo_callback_url` (PUBLIC_BASE_URL and MOMO_CALLBACK_TOKEN) once MTN MoMo is configured, ' +
          '`rate_source` (RATE_SOURCE_URL answers a rate no older than RATE_MAX_AGE_SECONDS, for every currency). Sandbox: empty, nothing to check.',
      },
    },
  },
};

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/onramps/readiness',
    operationId: 'getOnrampReadiness',
    summary: 'Whether on-ramps can run in this key\'s environment, and what is missing if not.',
    description: 'No quote, no payment provider call, no write. Sandbox is always enabled. Live checks the base chain and the rate source (each bounded to 2 s, ' +
      'answers reused for 5 s), the treasury hot wallet, and each configured provider\'s credentials and callback URL (M-Pesa Daraja, MTN MoMo). `enabled` is true when every check is ok.',
    tag: 'On-ramps',
    scope: 'transactions:read',
    responses: { '200': { description: 'The readiness of on-ramps.', schema: ref('OnrampReadiness') } },
    handler: async ({ deps, auth }) => {
      if (auth.environment === 'sandbox') {
        return { status: 200, body: { environment: 'sandbox', enabled: true, provider: 'sandbox', providers: ['sandbox'], chain: CHAIN, asset: 'USDC', currencies: onrampCurrencies(deps.config, false), checks: {} } };
      }
      const currencies = onrampCurrencies(deps.config, true);
      const checks = await liveChecks(deps.config, currencies);
      const enabled = Object.values(checks).every((c) => c.ok);
      const providers = liveRails(deps.config);
      return { status: 200, body: { environment: 'live', enabled, provider: providers[0], providers, chain: CHAIN, asset: 'USDC', currencies, checks } };
    },
  },
];
