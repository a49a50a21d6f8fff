import { pino, type Logger } from 'pino';
import { getConfig } from './config.js';
import { redactEmail, redactPhone } from './domain/payer-data.js';

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
  // Payer personal data (CONTRACT §15): logged only in its redacted form.
  ...['phone_number', 'phone', 'payer_phone', 'email'].flatMap((f) => [f, `*.${f}`, `*.*.${f}`]),
];

const PHONE_FIELDS = new Set(['phone_number', 'phone', 'payer_phone']);

/** A payer's phone or email keeps the redacted form the API shows; anything else censored is replaced outright. */
function censor(value: unknown, path: string[]): unknown {
  const field = path[path.length - 1];
  const text = typeof value === 'string' || typeof value === 'number' ? String(value) : null;
  if (text !== null && PHONE_FIELDS.has(field)) return redactPhone(text);
  if (text !== null && field === 'email') return redactEmail(text);
  return '[redacted]';
}

let root: Logger | null = null;

/**
 * Lines go to stdout asynchronously, so a log line never blocks the event loop on a slow pipe or disk: while one
 * write is out, the lines that follow gather and leave together in the next (fewer system calls under load, none
 * delayed when idle). What is still buffered when the process exits is flushed synchronously (pino does it on exit).
 */
export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  const opts = { level: options.level ?? getConfig().logLevel, redact: { paths: REDACT_PATHS, censor }, base: { pid: process.pid } };
  return pino(opts, options.destination ?? pino.destination({ dest: 1, sync: false }));
}

export function logger(): Logger {
  root ??= createLogger();
  return root;
}

/** Tests swap the root logger to capture lines. */
export function setLogger(next: Logger): void {
  root = next;
}
