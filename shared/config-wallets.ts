// Wallet keys, kept beside config.ts: which process may read the seeds, and the public keys every process derives
// addresses from. config.ts alone hands them the environment.
import { validateMnemonic } from '@scure/bip39';
import { wordlist as english } from '@scure/bip39/wordlists/english';
import { accountXpub, sameXpub, treasuryAddress, xpubProblem, type PublicWallet } from './chain/hd-wallet.js';

export type { PublicWallet };
import { checksumAddress } from './chain/address.js';
import { ConfigError } from './config-error.js';


export interface WalletSettings {
  /** live is null until it is configured: live customers, deposit addresses and chain rails then answer 503. */
  wallets: { sandbox: PublicWallet; live: PublicWallet | null };
  /** Only in a process that signs (loadConfig's `walletSeeds` option); null everywhere else, where no seed is read. */
  walletSeeds: { sandbox: string; live: string | null } | null;
}

// Development-only defaults, for the sandbox only (its funds are play money): live never uses them.
export const DEV_SEED_SANDBOX = 'test test test test test test test test test test test junk';
export const DEV_WALLET_SANDBOX: Readonly<PublicWallet> = {
  xpub: 'xpub6DyUKdwoLWmUJ4Tn9Bbsdtx7B5Ws18mEN19e5HT52ikE53FiUheSQXrZUNPovqfyKmw4579A1Mm3GXXKM39N64uooBfJ4tNAzFsEbodRTx4',
  treasuryAddress: '0x8C8d35429F74ec245F8Ef2f4Fd1e551cFF97d650',
};

/** A mistyped seed would derive addresses nobody can recover: refuse it at boot, never in a request. */
function walletSeed(name: string, raw: string | undefined): string | null {
  if (!raw) return null;
  const words = raw.trim().split(/\s+/).join(' ');
  if (!validateMnemonic(words, english)) throw new ConfigError(`${name} is not a valid BIP-39 English mnemonic (word count, spelling or checksum)`);
  return words;
}

/** WALLET_XPUB<suffix> and WALLET_TREASURY_ADDRESS<suffix> (both or neither), or null when neither is set. */
function publicWallet(env: NodeJS.ProcessEnv, suffix: '' | '_LIVE'): PublicWallet | null {
  const xpub = env[`WALLET_XPUB${suffix}`]?.trim();
  const treasury = env[`WALLET_TREASURY_ADDRESS${suffix}`]?.trim();
  if (!xpub && !treasury) return null;
  const environment = suffix === '' ? 'sandbox' : 'live';
  if (!xpub) throw new ConfigError(`WALLET_TREASURY_ADDRESS${suffix} is set without WALLET_XPUB${suffix} (npm run admin -- wallet-xpub --environment ${environment})`);
  if (!treasury) throw new ConfigError(`WALLET_XPUB${suffix} is set without WALLET_TREASURY_ADDRESS${suffix} (npm run admin -- treasury-address --environment ${environment})`);
  const problem = xpubProblem(xpub);
  if (problem) throw new ConfigError(`WALLET_XPUB${suffix} ${problem}; npm run admin -- wallet-xpub --environment ${environment} prints the right one`);
  const checked = checksumAddress(treasury);
  if ('problem' in checked) throw new ConfigError(`WALLET_TREASURY_ADDRESS${suffix} is not a valid EVM address (${checked.problem.replace(/_/g, ' ')})`);
  return { xpub, treasuryAddress: checked.address };
}

/** The seed's public keys; any given beside it must be the same, or the process would hand out addresses it cannot sign for. */
function fromSeed(suffix: '' | '_LIVE', seed: string, given: PublicWallet | null): PublicWallet {
  const derived: PublicWallet = { xpub: accountXpub(seed), treasuryAddress: treasuryAddress(seed) };
  const seedName = suffix === '' && seed === DEV_SEED_SANDBOX ? 'WALLET_SEED (unset: the public development seed)' : `WALLET_SEED${suffix}`;
  const env = suffix === '' ? 'sandbox' : 'live';
  if (given && !sameXpub(given.xpub, derived.xpub)) {
    throw new ConfigError(`WALLET_XPUB${suffix} does not match ${seedName}: npm run admin -- wallet-xpub --environment ${env} prints the seed's`);
  }
  if (given && given.treasuryAddress !== derived.treasuryAddress) {
    throw new ConfigError(`WALLET_TREASURY_ADDRESS${suffix} does not match ${seedName}: npm run admin -- treasury-address --environment ${env} prints the seed's`);
  }
  return derived;
}

/**
 * Every process derives addresses from WALLET_XPUB / WALLET_XPUB_LIVE. Only one asked for `walletSeeds` (the
 * settlement pool, the admin commands that need them, npm start) reads WALLET_SEED / WALLET_SEED_LIVE; it derives
 * the public keys from them and refuses public keys given beside them that do not match.
 */
export function walletSettings(env: NodeJS.ProcessEnv, opts: { walletSeeds: boolean }): WalletSettings {
  const given = { sandbox: publicWallet(env, ''), live: publicWallet(env, '_LIVE') };
  if (given.live && (sameXpub(given.live.xpub, DEV_WALLET_SANDBOX.xpub) || (given.sandbox && sameXpub(given.live.xpub, given.sandbox.xpub)))) {
    throw new ConfigError('WALLET_XPUB_LIVE must differ from the sandbox key (and from the public development key)');
  }
  if (!opts.walletSeeds) {
    return { wallets: { sandbox: given.sandbox ?? DEV_WALLET_SANDBOX, live: given.live }, walletSeeds: null };
  }
  const sandboxSeed = walletSeed('WALLET_SEED', env.WALLET_SEED);
  const liveSeed = walletSeed('WALLET_SEED_LIVE', env.WALLET_SEED_LIVE);
  if (liveSeed && (liveSeed === DEV_SEED_SANDBOX || liveSeed === sandboxSeed)) {
    throw new ConfigError('WALLET_SEED_LIVE must differ from the sandbox seed (and from the public development seed)');
  }
  const seeds = { sandbox: sandboxSeed ?? DEV_SEED_SANDBOX, live: liveSeed };
  return {
    wallets: { sandbox: fromSeed('', seeds.sandbox, given.sandbox), live: seeds.live ? fromSeed('_LIVE', seeds.live, given.live) : given.live },
    walletSeeds: seeds,
  };
}
