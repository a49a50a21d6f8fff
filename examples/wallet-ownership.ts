// Proving ownership of an external wallet with viem: register it, ask for a challenge, sign the message exactly as
// given (EIP-191 personal_sign), send the signature. A verified external wallet can fund off-ramps and receive on-ramps.
//   RAMPWAY_KEY=svc_test_... [WALLET_PRIVATE_KEY=0x...] npx tsx examples/wallet-ownership.ts
import { pathToFileURL } from 'node:url';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createRampwayClient, idempotencyKey, unwrap, type Schemas } from '@rampway/client';

export async function proveOwnership(options: { baseUrl: string; apiKey: string; privateKey?: `0x${string}`; log?: (line: string) => void }): Promise<Schemas['Wallet']> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  // In your product the private key stays with its owner; only the signature travels.
  const account = privateKeyToAccount(options.privateKey ?? generatePrivateKey());

  const wallet = unwrap(await api.POST('/api/v1/business/wallets', {
    params: { header: { 'Idempotency-Key': idempotencyKey('wallet') } },
    body: { address: account.address, chain: 'base', label: 'Treasury Safe signer' },
  }));
  log(`wallet ${wallet.id} ${wallet.address}: ${wallet.ownership_status}`);

  const challenge = unwrap(await api.POST('/api/v1/business/wallets/{id}/verification-challenges', {
    params: { path: { id: wallet.id }, header: { 'Idempotency-Key': idempotencyKey('challenge') } },
  }));
  const signature = await account.signMessage({ message: challenge.message });

  const verified = unwrap(await api.POST('/api/v1/business/wallets/{id}/verify', {
    params: { path: { id: wallet.id }, header: { 'Idempotency-Key': idempotencyKey('verify') } },
    body: { challenge_id: challenge.id, signature },
  }));
  log(`wallet ${verified.id}: ${verified.ownership_status} at ${verified.verified_at}`);
  return verified;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a sandbox key.');
    process.exit(2);
  }
  await proveOwnership({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey, privateKey: process.env.WALLET_PRIVATE_KEY as `0x${string}` | undefined });
}
