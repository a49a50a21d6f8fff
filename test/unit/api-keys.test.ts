import { expect } from 'chai';
import { generateApiKey, hashApiKey, keyEnvironment, normalizeIp } from '../../shared/domain/api-keys.js';

describe('API keys', () => {
  it('are the environment prefix and 32 random bytes, stored as a SHA-256 hash and a display prefix', () => {
    const a = generateApiKey('sandbox');
    const b = generateApiKey('live');
    expect(a.key).to.match(/^svc_test_[A-Za-z0-9_-]{43}$/);
    expect(b.key).to.match(/^svc_live_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a.key.slice(9), 'base64url')).to.have.length(32);
    expect(a.hash).to.equal(hashApiKey(a.key)).and.to.match(/^[0-9a-f]{64}$/);
    expect(a.prefix).to.equal(a.key.slice(0, 15));
    expect(generateApiKey('sandbox').key).not.to.equal(a.key);
    expect([keyEnvironment(a.key), keyEnvironment(b.key), keyEnvironment('svc_test_short'), keyEnvironment(`svc_prod_${'a'.repeat(43)}`)])
      .to.deep.equal(['sandbox', 'live', null, null]);
  });

  it('normalizes addresses so one address has one spelling', () => {
    expect(normalizeIp('203.0.113.9')).to.equal('203.0.113.9');
    // IPv4-mapped IPv6, dotted or in hex (as a URL parser prints it), is the IPv4 address.
    expect(normalizeIp('::ffff:127.0.0.1')).to.equal('127.0.0.1');
    expect(normalizeIp('::FFFF:7f00:1')).to.equal('127.0.0.1');
    expect(normalizeIp('::ffff:cb00:7109')).to.equal('203.0.113.9');
    expect(normalizeIp('2001:DB8:0:0:0:0:0:1')).to.equal('2001:db8::1');
    expect(normalizeIp('[::1]')).to.equal('::1');
    expect(normalizeIp('fe80::1%eth0')).to.equal(null);
    expect(normalizeIp('localhost')).to.equal(null);
    expect(normalizeIp('1.2.3.256')).to.equal(null);
  });
});
