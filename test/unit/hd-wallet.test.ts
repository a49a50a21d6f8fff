import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { createRequire } from 'node:module';
import { mnemonicToAccount } from 'viem/accounts';
import { accountXpub, managedWalletAccount, managedWalletAddress as fromXpub, managedWalletPath, xpubProblem } from '../../shared/chain/hd-wallet.js';

const SEED = 'test test test test test test test test test test test junk';
const OTHER_SEED = 'legal winner thank year wave sausage worth useful legal winner thank yellow';
// The address as a process without the seed derives it: from the account xpub alone.
const managedWalletAddress = (seed: string, index: number) => fromXpub(accountXpub(seed), index);

describe('managed wallet derivation', () => {
  it('derives the BIP-44 Ethereum addresses of the seed (m/44\'/60\'/0\'/0/i)', () => {
    expect(managedWalletAddress(SEED, 0)).to.equal('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266');
    expect(managedWalletAddress(SEED, 1)).to.equal('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
    for (const index of [2, 9, 1000]) {
      expect(managedWalletAddress(SEED, index)).to.equal(mnemonicToAccount(SEED, { addressIndex: index }).address);
    }
    expect(managedWalletPath(7)).to.equal("m/44'/60'/0'/0/7");
  });

  it('the account xpub is the node m/44\'/60\'/0\'/0 and holds no private key', () => {
    expect(accountXpub(SEED)).to.equal('xpub6DyUKdwoLWmUJ4Tn9Bbsdtx7B5Ws18mEN19e5HT52ikE53FiUheSQXrZUNPovqfyKmw4579A1Mm3GXXKM39N64uooBfJ4tNAzFsEbodRTx4');
    expect(xpubProblem(accountXpub(SEED))).to.equal(null);
    expect(accountXpub(OTHER_SEED)).to.match(/^xpub/).and.not.to.equal(accountXpub(SEED));
  });

  it('refuses an xprv, a node at another depth, and a mistyped key', () => {
    const account = mnemonicToAccount(SEED, { path: "m/44'/60'/0'/0/0" }).getHdKey();
    expect(xpubProblem(account.privateExtendedKey)).to.match(/private key/);
    expect(xpubProblem(account.publicExtendedKey)).to.match(/depth-5/);
    expect(xpubProblem(`${accountXpub(SEED).slice(0, -1)}5`)).to.match(/not an extended public key/);
  });

  it('the xpub address agrees with the signing account across many indexes and both seeds', () => {
    const indexes = [...Array.from({ length: 40 }, (_, i) => i), 4095, 65_536, 1_000_003, 2 ** 31 - 1];
    for (const seed of [SEED, OTHER_SEED]) {
      for (const index of indexes) {
        expect(managedWalletAddress(seed, index), `index ${index}`).to.equal(managedWalletAccount(seed, index).address);
      }
    }
  });

  it('gives different addresses for different seeds at the same index', () => {
    expect(managedWalletAddress(OTHER_SEED, 0)).not.to.equal(managedWalletAddress(SEED, 0));
  });

  it('signs with the key of the derived address', async () => {
    const account = managedWalletAccount(SEED, 3);
    expect(account.address).to.equal(managedWalletAddress(SEED, 3));
    expect(await account.signMessage({ message: 'hi' })).to.match(/^0x[0-9a-f]{130}$/);
  });

  it('refuses indexes outside the non-hardened range', () => {
    for (const bad of [-1, 1.5, 2 ** 31]) expect(() => managedWalletAddress(SEED, bad)).to.throw(RangeError);
  });
});

// managedWalletAddress's point is libsecp256k1's, through the secp256k1 package: its prebuilt addon where one ships
// (linux-x64 here, as on the platform's dynos), its JavaScript fallback elsewhere.
describe('the secp256k1 package behind the derivation', () => {
  const require = createRequire(import.meta.url);
  type Tweak = { publicKeyTweakAdd(key: Uint8Array, tweak: Uint8Array, compressed?: boolean): Uint8Array };

  it('loads its prebuilt native addon on linux-x64', function () {
    if (process.platform !== 'linux' || process.arch !== 'x64') this.skip();
    expect(() => require('secp256k1/bindings')).not.to.throw();
  });

  it('its JavaScript fallback gives the same child keys, and both refuse a tweak at or past the curve order', () => {
    const [native, fallback]: Tweak[] = [require('secp256k1'), require('secp256k1/elliptic')];
    const parent = Buffer.from('0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798', 'hex'); // the generator
    for (let i = 0; i < 20; i++) {
      const tweak = createHmac('sha512', 'tweak').update(String(i)).digest().subarray(0, 32);
      expect(Buffer.from(fallback.publicKeyTweakAdd(parent, tweak, false)).toString('hex')).to.equal(Buffer.from(native.publicKeyTweakAdd(parent, tweak, false)).toString('hex'));
    }
    const order = Buffer.from('fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141', 'hex');
    for (const impl of [native, fallback]) expect(() => impl.publicKeyTweakAdd(parent, order, false)).to.throw();
  });
});
