import { pino, type Logger } from 'pino';
import { getConfig } from './config.js';

// Anything that could carry a credential, a key or a beneficiary's details is censored wherever it appears.
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["idempotency-key"]',
  'headers.authorization',
  'authorization',
  'apiKey', '*.apiKey', 'api_key', '*.api_key',
  'key', '*.key',
  'secret', '*.secret',
  'password', '*.password',
  'privateKey', '*.privateKey', 'private_key', '*.private_key',
  'seed', '*.seed', 'mnemonic', '*.mnemonic',
  'details', '*.details',
  'body', '*.body',
];

let root: Logger | null = null;

export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  const opts = { level: options.level ?? getConfig().logLevel, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { pid: process.pid } };
  return options.destination ? pino(opts, options.destination) : pino(opts);
}

export function logger(): Logger {
  root ??= createLogger();
  return root;
}

/** Tests swap the root logger to capture lines. */
export function setLogger(next: Logger): void {
  root = next;
}
