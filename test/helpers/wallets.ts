import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { ApiHarness } from './harness.js';
import { writeHeaders } from './factories.js';
import { accountXpub, treasuryAddress } from '../../shared/chain/hd-wallet.js';

export const BASE = '/api/v1/business';

/** A fresh EOA; tests sign with it to prove ownership. */
export function newAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

/** POST /customers with a fresh reference; returns the response body (throws unless 201). */
export async function createCustomer(api: ApiHarness, key: string): Promise<{ id: string; wallet: { id: string; address: string } }> {
  const res = await api.http.post(`${BASE}/customers`).set(writeHeaders(key)).send({ external_reference: `c-${randomUUID()}` });
  if (res.status !== 201) throw new Error(`createCustomer: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** POST /wallets; returns the raw response. */
export function registerWallet(api: ApiHarness, key: string, body: Record<string, unknown>) {
  return api.http.post(`${BASE}/wallets`).set(writeHeaders(key)).send(body);
}

/** Registers a fresh external EOA wallet on `chain`; returns the account and the wallet body (throws unless 201). */
export async function externalWallet(api: ApiHarness, key: string, chain = 'base'): Promise<{ account: PrivateKeyAccount; wallet: { id: string; address: string } }> {
  const account = newAccount();
  const res = await registerWallet(api, key, { address: account.address, chain });
  if (res.status !== 201) throw new Error(`externalWallet: ${res.status} ${JSON.stringify(res.body)}`);
  return { account, wallet: res.body };
}

/** What a process that holds no seed is given for `environment`: the public keys of `mnemonic` (the seed's own). */
export function walletKeyEnv(mnemonic: string, environment: 'sandbox' | 'live'): Record<string, string> {
  const suffix = environment === 'live' ? '_LIVE' : '';
  return { [`WALLET_XPUB${suffix}`]: accountXpub(mnemonic), [`WALLET_TREASURY_ADDRESS${suffix}`]: treasuryAddress(mnemonic) };
}
