import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { SealedRecordUnreadable, open, openJson, reseal, seal, sealJson, type MasterKey } from '../../shared/crypto/envelope.js';

const k1: MasterKey = { id: 'k1', key: randomBytes(32) };
const k2: MasterKey = { id: 'k2', key: randomBytes(32) };
const AAD = 'rampway:beneficiaries.details:biz:sandbox:row-1';
const SECRET = '+254712345678';

describe('envelope encryption', () => {
  it('round-trips under the first key, storing its id and a 60-byte wrapped data key', () => {
    const sealed = sealJson({ phone_number: SECRET }, [k1, k2], AAD);
    expect(sealed.keyId).to.equal('k1');
    expect(sealed.wrappedKey.length).to.equal(12 + 16 + 32);
    expect(sealed.iv.length).to.equal(12);
    expect(sealed.tag.length).to.equal(16);
    expect(openJson(sealed, [k1, k2], AAD)).to.deep.equal({ phone_number: SECRET });
  });

  it('never stores the plaintext, and two seals of the same value share nothing', () => {
    const a = seal(Buffer.from(SECRET), [k1], AAD);
    const b = seal(Buffer.from(SECRET), [k1], AAD);
    expect(a.ciphertext.toString('latin1')).not.to.contain(SECRET);
    expect(a.ciphertext.equals(b.ciphertext)).to.equal(false);
    expect(a.wrappedKey.equals(b.wrappedKey)).to.equal(false);
    expect(a.iv.equals(b.iv)).to.equal(false);
  });

  it('opens with whichever listed key the record names, in any order', () => {
    const underK1 = seal(Buffer.from(SECRET), [k1], AAD);
    expect(open(underK1, [k2, k1], AAD).toString()).to.equal(SECRET);
  });

  it('refuses a record whose key is not listed', () => {
    const underK1 = seal(Buffer.from(SECRET), [k1], AAD);
    expect(() => open(underK1, [k2], AAD)).to.throw(SealedRecordUnreadable, /"k1" is not in ENCRYPTION_KEYS/);
  });

  it('refuses a different key under the same id, a wrong AAD, and any tampering', () => {
    const sealed = seal(Buffer.from(SECRET), [k1], AAD);
    expect(() => open(sealed, [{ id: 'k1', key: randomBytes(32) }], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
    expect(() => open(sealed, [k1], `${AAD}x`)).to.throw(SealedRecordUnreadable, /does not open/);
    const flip = (b: Buffer) => {
      const c = Buffer.from(b);
      c[0] ^= 1;
      return c;
    };
    expect(() => open({ ...sealed, ciphertext: flip(sealed.ciphertext) }, [k1], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
    expect(() => open({ ...sealed, tag: flip(sealed.tag) }, [k1], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
    expect(() => open({ ...sealed, iv: flip(sealed.iv) }, [k1], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
    expect(() => open({ ...sealed, wrappedKey: flip(sealed.wrappedKey) }, [k1], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
    // A wrapped key relabelled as another key's does not open either.
    expect(() => open({ ...sealed, keyId: 'k2' }, [{ id: 'k2', key: k1.key }], AAD)).to.throw(SealedRecordUnreadable, /does not open/);
  });

  it('reseals under the new first key with a fresh data key; the old key is then no longer needed', () => {
    const old = seal(Buffer.from(SECRET), [k1], AAD);
    const moved = reseal(old, [k2, k1], AAD);
    expect(moved.keyId).to.equal('k2');
    expect(moved.ciphertext.equals(old.ciphertext)).to.equal(false);
    expect(open(moved, [k2], AAD).toString()).to.equal(SECRET);
  });
});
