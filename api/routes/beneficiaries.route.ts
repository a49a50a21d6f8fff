import { AppError } from '../../shared/errors.js';
import { paginationQuery, listOf } from '../openapi/components.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';
import { PAYMENT_METHODS, requireCorridor } from '../../shared/domain/corridors.js';
import type { Details } from '../../shared/domain/corridor-details.js';
import {
  archiveBeneficiary, BENEFICIARY_COLUMNS, createBeneficiary, getBeneficiary, updateBeneficiaryLabel, type BeneficiaryRow,
} from '../../shared/domain/beneficiaries.js';
import type { PageQuery } from '../../shared/db/pagination.js';
import { listPage } from '../../shared/db/pagination.js';

const CURRENCY = { type: 'string', pattern: '^[A-Za-z]{3}$', maxLength: 3, description: 'ISO 4217 code, exactly 3 letters in either case (`kes` is read as `KES`).' };
const LABEL = { type: ['string', 'null'], maxLength: 120, description: 'Your own name for this beneficiary.' };

export const schemas: Record<string, JsonSchema> = {
  PaymentMethod: { type: 'string', enum: [...PAYMENT_METHODS] },
  BeneficiaryRequirementField: {
    type: 'object',
    required: ['name', 'type', 'required', 'description', 'sensitive'],
    properties: {
      name: { type: 'string' },
      type: { type: 'string', enum: ['string'] },
      required: { type: 'boolean' },
      description: { type: 'string' },
      pattern: { type: 'string', description: 'ECMA-262 regular expression the value must match.' },
      enum: { type: 'array', items: { type: 'string' } },
      min_length: { type: 'integer' },
      max_length: { type: 'integer' },
      sensitive: { type: 'boolean', description: 'Stored encrypted and shown redacted to its last 4 characters.' },
    },
  },
  BeneficiaryRequirements: {
    type: 'object',
    required: ['currency', 'payment_method', 'fields', 'schema'],
    properties: {
      currency: { type: 'string' },
      payment_method: ref('PaymentMethod'),
      fields: { type: 'array', items: ref('BeneficiaryRequirementField') },
      schema: { type: 'object', description: 'JSON Schema (2020-12) that `details` must satisfy.' },
    },
  },
  Beneficiary: {
    type: 'object',
    required: ['id', 'currency', 'payment_method', 'account_holder_name', 'status', 'label', 'external_reference', 'customer_id', 'created_at', 'updated_at', 'archived_at'],
    properties: {
      id: ref('Uuid'),
      currency: { type: 'string' },
      payment_method: ref('PaymentMethod'),
      account_holder_name: { type: 'string' },
      status: { type: 'string', enum: ['active', 'archived'] },
      label: { type: ['string', 'null'] },
      external_reference: { type: ['string', 'null'] },
      customer_id: { type: ['string', 'null'], format: 'uuid' },
      details: {
        type: 'object',
        additionalProperties: { type: 'string' },
        description: 'Only on create and retrieve responses, never in lists. Sensitive values keep only their last 4 characters.',
      },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
      archived_at: { type: ['string', 'null'], format: 'date-time' },
    },
  },
  BeneficiaryList: listOf('Beneficiary'),
  CreateBeneficiaryRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['currency', 'payment_method', 'account_holder_name', 'details'],
    properties: {
      currency: CURRENCY,
      payment_method: ref('PaymentMethod'),
      account_holder_name: { type: 'string', minLength: 1, maxLength: 140, pattern: '\\S' },
      details: { type: 'object', description: 'Fields per GET /beneficiaries/requirements; failing them answers 422 requirements_not_met.' },
      label: LABEL,
      external_reference: { type: 'string', minLength: 1, maxLength: 128 },
      customer_id: { type: 'string', format: 'uuid', description: 'A customer of this business in this environment.' },
    },
  },
  UpdateBeneficiaryRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['label'],
    properties: { label: LABEL },
  },
};

function beneficiaryView(b: BeneficiaryRow, details?: Details): Record<string, unknown> {
  return {
    id: b.id,
    currency: b.currency,
    payment_method: b.payment_method,
    account_holder_name: b.account_holder_name,
    status: b.status,
    label: b.label,
    external_reference: b.external_reference,
    customer_id: b.customer_id,
    ...(details ? { details } : {}),
    created_at: b.created_at.toISOString(),
    updated_at: b.updated_at.toISOString(),
    archived_at: b.archived_at ? b.archived_at.toISOString() : null,
  };
}

const TAG = 'Beneficiaries';
const one = (description: string) => ({ description, schema: ref('Beneficiary') });

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/beneficiaries/requirements',
    operationId: 'getBeneficiaryRequirements',
    errors: ['unsupported_corridor'],
    summary: 'The detail fields, and their JSON Schema, a beneficiary needs for a currency and payment method.',
    description: 'A pair we do not pay out to answers 422 `unsupported_corridor`, with `details.supported_payment_methods` for the currency.',
    tag: TAG,
    scope: 'beneficiaries:read',
    query: {
      currency: { schema: CURRENCY, required: true, example: 'KES' },
      payment_method: { schema: ref('PaymentMethod'), required: true, example: 'mobile_money' },
    },
    responses: { '200': { description: 'The corridor\'s requirements.', schema: ref('BeneficiaryRequirements') } },
    handler: async ({ query }) => {
      const corridor = requireCorridor(query.currency.toUpperCase(), query.payment_method, 'offramp');
      return { status: 200, body: { currency: corridor.currency, payment_method: corridor.payment_method, fields: corridor.fields, schema: corridor.schema } };
    },
  },
  {
    method: 'get',
    path: '/beneficiaries',
    operationId: 'listBeneficiaries',
    summary: 'Beneficiaries, newest first, without their details.',
    tag: TAG,
    scope: 'beneficiaries:read',
    query: {
      include_archived: { schema: { type: 'boolean', default: false }, description: 'Also list archived beneficiaries.' },
      ...paginationQuery,
    },
    responses: { '200': { description: 'A page of beneficiaries.', schema: ref('BeneficiaryList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as PageQuery & { include_archived: boolean };
      const where = ['b.business_id = $1', 'b.environment = $2', ...(q.include_archived ? [] : [`b.status = 'active'`])];
      const page = await listPage<BeneficiaryRow & { cursor_ts: string }, unknown>(
        deps.ds, { columns: BENEFICIARY_COLUMNS, from: 'beneficiaries b', alias: 'b', where, params: [auth.businessId, auth.environment] }, q, (b) => beneficiaryView(b),
      );
      return { status: 200, body: page };
    },
  },
  {
    method: 'post',
    path: '/beneficiaries',
    operationId: 'createBeneficiary',
    errors: ['resource_archived', 'unsupported_corridor', 'requirements_not_met'],
    summary: 'Stores a payout destination; its details are encrypted at rest and returned redacted.',
    description: '422 `unsupported_corridor` for a pair we do not serve; 422 `requirements_not_met` with `details: [{ path, message }]` when `details` fail the corridor\'s schema. ' +
      'A `customer_id` outside this business and environment: 404 `not_found` (`details.param`); an archived customer: 409 `resource_archived`.',
    tag: TAG,
    scope: 'beneficiaries:write',
    body: { schema: ref('CreateBeneficiaryRequest'), examples: {
      kes_mobile_money: {
        summary: 'M-Pesa payout to a Kenyan phone',
        value: { currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Amina Wanjiru', details: { phone_number: '+254712345678', mobile_network: 'safaricom' }, label: 'Payroll' },
      },
      ngn_bank_transfer: {
        summary: 'Nigerian bank account (NUBAN)',
        value: { currency: 'NGN', payment_method: 'bank_transfer', account_holder_name: 'Chidi Okafor', details: { bank_code: '058', account_number: '0123456789' } },
      },
    } },
    responses: { '201': one('The new beneficiary, details redacted.') },
    handler: async ({ deps, auth, body, reply }) => {
      // Live details are never sealed under the built-in development key.
      if (auth.environment === 'live' && !deps.config.encryptionKeysConfigured) {
        throw AppError.unavailable('Live beneficiaries need ENCRYPTION_KEYS to be configured on this deployment.', 60);
      }
      return reply(async (unit) => {
        const created = await createBeneficiary(unit.em, deps.config.encryptionKeys, auth, body);
        return { status: 201, body: beneficiaryView(created.beneficiary, created.details) };
      });
    },
  },
  {
    method: 'get',
    path: '/beneficiaries/{id}',
    operationId: 'getBeneficiary',
    summary: 'One beneficiary, details redacted.',
    tag: TAG,
    scope: 'beneficiaries:read',
    pathParams: { id: uuidParam },
    responses: { '200': one('The beneficiary.') },
    handler: async ({ deps, auth, params }) => {
      const found = await getBeneficiary(deps.ds, deps.config.encryptionKeys, auth, params.id);
      return { status: 200, body: beneficiaryView(found.beneficiary, found.details) };
    },
  },
  {
    method: 'patch',
    path: '/beneficiaries/{id}',
    operationId: 'updateBeneficiary',
    errors: ['resource_archived'],
    summary: 'Sets or clears (null) the label.',
    description: '`label` is the only field and is required. An archived beneficiary cannot be changed: 409 `resource_archived`.',
    tag: TAG,
    scope: 'beneficiaries:write',
    pathParams: { id: uuidParam },
    body: { schema: ref('UpdateBeneficiaryRequest'), examples: { rename: { summary: 'Give it a new label', value: { label: 'Suppliers' } }, clear: { summary: 'Remove the label', value: { label: null } } }  },
    responses: { '200': one('The updated beneficiary (without details).') },
    handler: async ({ auth, params, body, reply }) => reply(async (unit) => ({
      status: 200,
      body: beneficiaryView(await updateBeneficiaryLabel(unit.em, auth, params.id, body.label)),
    })),
  },
  {
    method: 'delete',
    path: '/beneficiaries/{id}',
    operationId: 'archiveBeneficiary',
    summary: 'Archives the beneficiary: it leaves the default list and can no longer be quoted (409 `resource_archived`).',
    description: 'Archiving an already archived beneficiary answers 200 with it unchanged (the original `archived_at`).',
    tag: TAG,
    scope: 'beneficiaries:write',
    pathParams: { id: uuidParam },
    responses: { '200': one('The archived beneficiary (without details).') },
    handler: async ({ auth, params, reply }) => reply(async (unit) => ({ status: 200, body: beneficiaryView(await archiveBeneficiary(unit, auth, params.id)) })),
  },
];
