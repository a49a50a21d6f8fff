import { randomUUID } from 'node:crypto';
import { AppError, ERROR_CODES, type ErrorCode } from '../../shared/errors.js';
import { createQuote, findQuote, pricedQuoteOf, quoteJobs, quoteView, type CreateQuoteInput } from '../../shared/domain/quotes.js';
import { QUOTE_STATUSES } from '../../shared/domain/machines.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';
import type { RecordRef } from '../../shared/db/idempotency-records.js';
import { QUOTE_PRICED } from '../openapi/answers.js';

const AMOUNT = { ...ref('DecimalAmount'), type: 'string', maxLength: 40 };
const NULLABLE_AMOUNT = { type: ['string', 'null'] };

export const schemas: Record<string, JsonSchema> = {
  Quote: {
    type: 'object',
    required: ['id', 'direction', 'status', 'chain', 'currency', 'payment_method', 'source', 'destination', 'exchange_rate', 'fees', 'beneficiary_id', 'wallet_id', 'expires_at', 'failure', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      direction: { type: 'string', enum: ['offramp', 'onramp'] },
      status: { type: 'string', enum: [...QUOTE_STATUSES], description: '`pending` until the pricing pool has priced it; `available` until `expires_at`; then `expired`, or `consumed` by an on- or off-ramp. `failed` carries `failure`.' },
      chain: ref('Chain'),
      currency: { type: 'string', description: 'The fiat side, ISO 4217.' },
      payment_method: ref('PaymentMethod'),
      source: {
        type: 'object',
        required: ['amount', 'total_required'],
        properties: {
          asset: { type: 'string', enum: ['USDC'] },
          currency: { type: 'string' },
          amount: { ...NULLABLE_AMOUNT, description: 'Off-ramp: USDC sent; on-ramp: fiat converted. Null while pending if you asked by destination.' },
          total_required: { ...NULLABLE_AMOUNT, description: 'amount plus fees: what the business (off-ramp) or the customer (on-ramp) pays.' },
        },
      },
      destination: {
        type: 'object',
        required: ['amount'],
        properties: {
          asset: { type: 'string', enum: ['USDC'] },
          currency: { type: 'string' },
          chain: ref('Chain'),
          amount: { ...NULLABLE_AMOUNT, description: 'What is received: rounded down, never in the platform\'s favour by less.' },
        },
      },
      exchange_rate: { type: ['string', 'null'], description: 'Fiat units per 1 USDC, up to 8 decimals.' },
      fees: {
        type: ['object', 'null'],
        required: ['provider', 'platform', 'currency'],
        properties: { provider: { type: 'string' }, platform: { type: 'string' }, currency: { type: 'string', description: 'The source unit.' } },
      },
      beneficiary_id: { type: ['string', 'null'], format: 'uuid' },
      wallet_id: { type: ['string', 'null'], format: 'uuid' },
      expires_at: { type: ['string', 'null'], format: 'date-time' },
      failure: { type: ['object', 'null'], required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  CreateQuoteRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['direction', 'chain', 'currency', 'payment_method'],
    properties: {
      direction: { type: 'string', enum: ['offramp', 'onramp'] },
      chain: ref('Chain'),
      currency: { type: 'string', pattern: '^[A-Za-z]{3}$', maxLength: 3, description: 'The fiat currency (either case).' },
      payment_method: ref('PaymentMethod'),
      source_amount: { ...AMOUNT, description: 'What is sent (USDC for off-ramps, fiat for on-ramps). Exactly one of source_amount and destination_amount.' },
      destination_amount: { ...AMOUNT, description: 'What must arrive; the smallest source that delivers at least this is quoted.' },
      beneficiary_id: { ...ref('Uuid'), description: 'Off-ramps: who is paid. Its currency and payment method must be the quote\'s.' },
      wallet_id: { ...ref('Uuid'), description: 'On-ramps: the managed wallet, or a verified external wallet on `chain`, that receives the USDC.' },
    },
  },
};

/** A failed pricing answers with its reason when that reason is a contract code (amount_out_of_range), else 503. */
function failureError(failure: { code: string; message: string; details?: unknown }): AppError {
  return (ERROR_CODES as readonly string[]).includes(failure.code) && failure.code !== 'internal_error'
    ? new AppError(failure.code as ErrorCode, failure.message, failure.details)
    : AppError.unavailable(failure.message, 1);
}

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/quotes',
    operationId: 'createQuote',
    errors: ['resource_archived', 'unsupported_corridor', 'amount_out_of_range', 'wallet_not_verified'],
    summary: 'Price an on-ramp or off-ramp.',
    description:
      'Writes the quote and has the pricing pool price it, waiting up to about 2 s: 201 `available` when priced in time, else 202 `pending` (poll GET). ' +
      'A price outside the corridor\'s limits answers 422 `amount_out_of_range` (the quote is kept as `failed`). 422 `unsupported_corridor` for a pair we do not serve, ' +
      'with `details.reason` `beneficiary_mismatch`, `direction_not_supported` or `no_live_provider`; 422 `wallet_not_verified` for an unproven external wallet.',
    tag: 'Quotes',
    scope: 'quotes:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreateQuoteRequest'),
      examples: {
        offramp: { summary: 'Send 100 USDC to a KES M-Pesa beneficiary', value: { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '100.00', beneficiary_id: '00000000-0000-4000-8000-000000000000' } },
        onramp: { summary: 'Deliver 50 USDC, paid by M-Pesa', value: { direction: 'onramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', destination_amount: '50', wallet_id: '00000000-0000-4000-8000-000000000000' } },
      },
    },
    responses: {
      '201': { description: 'Priced: `available` until `expires_at`.', schema: ref('Quote') },
      '202': { description: 'Not priced yet: `pending`; GET it shortly.', schema: ref('Quote') },
    },
    handler: async ({ deps, auth, body, reply, closeAnswer }) => {
      if (auth.environment === 'live' && !deps.config.rateSourceUrl) throw AppError.unavailable('Live pricing is not configured on this deployment yet.', 60);
      const id = randomUUID();
      // Registered before the pricing job is enqueued (after the commit), so its end cannot be missed.
      const waiting = deps.pricingWaiters.wait(quoteJobs.price(id).id, deps.config.quoteWaitMs);
      let quote: Awaited<ReturnType<typeof createQuote>> | undefined;
      // The request's idempotency record, which the pricing unit replaces with the priced answer while this waits.
      let record: RecordRef | undefined;
      const answerOf = (q: NonNullable<typeof quote>) => ({ status: q.status === 'pending' ? 202 : QUOTE_PRICED, body: quoteView(q) });
      try {
        // The record commits with the quote as it is written (202 pending), replaceable: priced in time, the pricing
        // unit writes the priced answer into it, and this sends those bytes.
        await reply(async (unit, ref) => {
          record = ref;
          return { ...answerOf((quote = await createQuote(unit, deps.config, auth, id, body as CreateQuoteInput, ref))), replaceable: !!ref };
        });
      } catch (err) {
        waiting.cancel();
        throw err;
      }
      const end = await waiting.done;
      // Priced in time: the pricing job answered the quote as committed, and wrote that answer into the request's record
      // (the record's reference was in its job): sent as it is, nothing read or written again.
      const priced = end && pricedQuoteOf(end.returned);
      if (priced && priced.answer !== undefined && record) return { status: QUOTE_PRICED, body: priced.quote, recorded: priced.answer };
      // Otherwise the record is closed first, so the pricing can no longer replace it, and holds this request's answer
      // from here on: sent as it is when the wait ran out, or when someone closed it before this request did (the
      // pricing as it wrote the priced answer, or a replay of this key, Redis having forgotten it, answered from it).
      const held = await closeAnswer();
      if (held && (!end || !held.closedHere)) return { status: held.status, body: quoteView(quote!), recorded: held.body };
      if (!end) return answerOf(quote!);
      if (priced) return { status: QUOTE_PRICED, body: priced.quote };
      // Failed, or a job that found it already moved: the row says what happened.
      quote = await findQuote(deps.ds, auth, id);
      if (quote.status === 'failed' && quote.failure) throw failureError(quote.failure);
      return answerOf(quote);
    },
  },
  {
    method: 'get',
    path: '/quotes/{id}',
    operationId: 'getQuote',
    summary: 'Retrieve a quote.',
    tag: 'Quotes',
    scope: 'quotes:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The quote as it stands (an `available` quote past `expires_at` reads `expired`).', schema: ref('Quote') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: quoteView(await findQuote(deps.ds, auth, (params as { id: string }).id)) }),
  },
];
