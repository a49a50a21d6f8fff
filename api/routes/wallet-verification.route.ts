import { checkChallengeSignature, createChallenge, verifyWallet } from '../../shared/domain/wallet-ownership.js';
import { walletView } from '../../shared/domain/wallets.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

export const schemas: Record<string, JsonSchema> = {
  WalletVerificationChallenge: {
    type: 'object',
    required: ['id', 'wallet_id', 'message', 'expires_at'],
    properties: {
      id: ref('Uuid'),
      wallet_id: ref('Uuid'),
      message: {
        type: 'string',
        description: 'EIP-4361 (Sign-In with Ethereum) text with the address, chain id, a random nonce and the expiry. Sign it exactly as given (EIP-191 personal_sign).',
      },
      expires_at: { ...ref('Timestamp'), description: '10 minutes after creation.' },
    },
  },
  VerifyWalletRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['challenge_id', 'signature'],
    properties: {
      challenge_id: ref('Uuid'),
      signature: { type: 'string', pattern: '^0x([0-9a-fA-F]{2})+$', maxLength: 20000, description: 'Hex signature of the challenge message (EOA, EIP-1271 or ERC-6492).' },
    },
  },
};

const walletPath = { id: uuidParam };
const walletId = (params: unknown): string => (params as { id: string }).id;

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/wallets/{id}/verification-challenges',
    operationId: 'createWalletVerificationChallenge',
    errors: ['invalid_state', 'resource_archived'],
    summary: 'Create an ownership challenge for an external wallet.',
    description: 'No body. Managed wallets need no proof and a verified wallet was proven already (409 `invalid_state`); archived wallets cannot be challenged (409 `resource_archived`).',
    tag: 'Wallets',
    scope: 'wallets:write',
    pathParams: walletPath,
    responses: { '201': { description: 'The challenge to sign.', schema: ref('WalletVerificationChallenge') } },
    handler: async ({ deps, auth, params, reply }) => reply(async (unit) => ({ status: 201, body: await createChallenge(unit.em, deps.config, auth, walletId(params)) })),
  },
  {
    method: 'post',
    path: '/wallets/{id}/verify',
    operationId: 'verifyWallet',
    errors: ['invalid_state', 'resource_archived', 'invalid_signature', 'challenge_expired'],
    summary: 'Prove ownership of an external wallet with a signed challenge.',
    description:
      'Checks the signature (EIP-191; EIP-1271 for contract wallets on chains with an RPC). Success sets `ownership_status: verified` and `verified_at` and uses the challenge up ' +
      '(a second use, or any challenge once the wallet is verified: 409 `invalid_state`; `verified_at` stays the first proof\'s). Wrong signer: 422 `invalid_signature`; past `expires_at`: 422 `challenge_expired`.',
    tag: 'Wallets',
    scope: 'wallets:write',
    pathParams: walletPath,
    body: { schema: ref('VerifyWalletRequest') },
    responses: { '200': { description: 'The verified wallet.', schema: ref('Wallet') } },
    handler: async ({ deps, auth, params, body, reply }) => {
      const input = body as { challenge_id: string; signature: string };
      await checkChallengeSignature(deps.ds, deps.config, auth, walletId(params), input);
      return reply(async (unit) => ({ status: 200, body: walletView(await verifyWallet(unit, auth, walletId(params), input.challenge_id)) }));
    },
  },
];
