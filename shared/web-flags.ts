/**
 * The V8 flags the web process runs with, wherever it runs (the Procfile's web line, `npm start`, the benchmarks):
 * semi-spaces of up to 32 MB, where Node's default lets the young generation grow to 16 MB. Every request allocates
 * its parsed headers, rows, views and answer, and fifty requests in flight keep theirs alive across a smaller young
 * generation's collections, which then copy them. Measured in one run beside the hello world (docs/performance.md):
 * reads and creates 5 to 10% faster; 64 MB gained nothing more.
 */
export const WEB_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
