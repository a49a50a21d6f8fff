import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Address, Hex } from 'viem';
import { createSiweMessage } from 'viem/siwe';
import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import { ChainUnavailableError } from '../chain/clients.js';
import { isSignedBy } from '../chain/signatures.js';
import { CHAIN_IDS } from './chains.js';
import type { EventScope } from './events.js';
import type { Unit } from '../db/unit-of-work.js';
import { NOW, transition } from './transition.js';
import { WALLET_OWNERSHIP_MACHINE } from './machines.js';
import { assertActive, findWallet, walletView, type WalletRow } from './wallets.js';

export const CHALLENGE_TTL_MS = 10 * 60 * 1000;
const SIWE_STATEMENT = 'Rampway asks you to prove that you control this wallet. Signing is free and moves no funds.';

interface ChallengeRow {
  id: string;
  wallet_id: string;
  message: string;
  expires_at: Date;
  used_at: Date | null;
}

export function challengeView(row: Pick<ChallengeRow, 'id' | 'wallet_id' | 'message' | 'expires_at'>): Record<string, unknown> {
  return { id: row.id, wallet_id: row.wallet_id, message: row.message, expires_at: row.expires_at.toISOString() };
}

/** External, active and not yet verified: a proof is made once, so verified_at and the wallet.verified event stay the first proof's. */
function assertChallengeable(wallet: WalletRow): void {
  if (wallet.type === 'managed_wallet') throw AppError.invalidState('A managed wallet is held by the platform; it needs no ownership proof.', { wallet_id: wallet.id });
  assertActive(wallet);
  if (wallet.ownership_status === 'verified') {
    throw AppError.invalidState('This wallet is already verified.', { wallet_id: wallet.id, verified_at: wallet.verified_at?.toISOString() });
  }
}

/**
 * An EIP-4361 (Sign-In with Ethereum) message for the wallet's address and chain, valid 10 minutes.
 * Its domain and URI are the service's public address (PUBLIC_BASE_URL): wallets show them to the signer.
 */
export async function createChallenge(em: EntityManager, config: Config, scope: EventScope, walletId: string): Promise<Record<string, unknown>> {
  const wallet = await findWallet(em, scope, walletId);
  assertChallengeable(wallet);
  const id = randomUUID();
  const nonce = randomBytes(16).toString('hex');
  const issuedAt = new Date();
  const expiresAt = new Date(issuedAt.getTime() + CHALLENGE_TTL_MS);
  const message = createSiweMessage({
    domain: new URL(config.publicBaseUrl).host,
    uri: config.publicBaseUrl,
    address: wallet.address as Address,
    chainId: CHAIN_IDS[wallet.chain],
    nonce,
    version: '1',
    statement: SIWE_STATEMENT,
    issuedAt,
    expirationTime: expiresAt,
    requestId: id,
  });
  await em.query(
    `INSERT INTO wallet_challenges (id, business_id, environment, wallet_id, nonce, message, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, scope.businessId, scope.environment, wallet.id, nonce, message, expiresAt],
  );
  return challengeView({ id, wallet_id: wallet.id, message, expires_at: expiresAt });
}

async function findChallenge(ds: DataSource, scope: EventScope, walletId: string, challengeId: string): Promise<ChallengeRow> {
  const rows: ChallengeRow[] = await ds.query(
    `SELECT id, wallet_id, message, expires_at, used_at FROM wallet_challenges WHERE id = $1 AND wallet_id = $2 AND business_id = $3 AND environment = $4`,
    [challengeId, walletId, scope.businessId, scope.environment],
  );
  if (!rows[0]) throw new AppError('not_found', 'No such verification challenge for this wallet.', { param: 'challenge_id' });
  return rows[0];
}

function assertUsable(challenge: ChallengeRow, now: Date): void {
  if (challenge.used_at) throw AppError.invalidState('This challenge was already used; create a new one.', { challenge_id: challenge.id });
  if (challenge.expires_at <= now) throw new AppError('challenge_expired', 'This challenge has expired; create a new one.', { challenge_id: challenge.id });
}

/**
 * Before any write: the challenge is this wallet's, unused and unexpired, and the signature over it is the
 * wallet's (EIP-191, or EIP-1271 through the chain's RPC). A network call, so it runs outside the transaction.
 */
export async function checkChallengeSignature(
  ds: DataSource,
  config: Config,
  scope: EventScope,
  walletId: string,
  input: { challenge_id: string; signature: string },
): Promise<void> {
  const wallet = await findWallet(ds, scope, walletId);
  assertChallengeable(wallet);
  const challenge = await findChallenge(ds, scope, wallet.id, input.challenge_id);
  assertUsable(challenge, new Date());

  let signed: boolean;
  try {
    signed = await isSignedBy(config, wallet.chain, wallet.address as Address, challenge.message, input.signature as Hex);
  } catch (err) {
    if (err instanceof ChainUnavailableError) throw AppError.unavailable(`The ${wallet.chain} network cannot be reached to check a contract wallet signature; retry shortly.`);
    throw err;
  }
  if (!signed) throw new AppError('invalid_signature', 'The signature was not made by this wallet over the challenge message.', { challenge_id: challenge.id });
}

/**
 * After checkChallengeSignature, in the caller's transaction: consumes the challenge and moves the wallet to
 * `verified` through the transition function (history row and `wallet.verified` event with it).
 */
export async function verifyWallet(unit: Unit, scope: EventScope, walletId: string, challengeId: string): Promise<WalletRow> {
  const { em } = unit;
  // The conditional update decides a race between two verifications of one challenge.
  const consumed: { id: string }[] = await em.query(
    `WITH used AS (UPDATE wallet_challenges SET used_at = now() WHERE id = $1 AND wallet_id = $2 AND business_id = $3 AND environment = $4 AND used_at IS NULL RETURNING id) SELECT id FROM used`,
    [challengeId, walletId, scope.businessId, scope.environment],
  );
  if (!consumed[0]) throw AppError.invalidState('This challenge was already used; create a new one.', { challenge_id: challengeId });
  const current = await findWallet(em, scope, walletId, 'update');
  assertChallengeable(current); // archived or verified meanwhile (through another challenge)
  const moved = await transition(unit, WALLET_OWNERSHIP_MACHINE, {
    scope,
    id: walletId,
    to: 'verified',
    expected: current.ownership_status,
    set: { verified_at: NOW },
    reason: `challenge ${challengeId}`,
    view: async () => walletView(await findWallet(em, scope, walletId)),
  });
  if (!moved) throw AppError.invalidState('This wallet is already verified.', { wallet_id: walletId });
  return findWallet(em, scope, walletId);
}
