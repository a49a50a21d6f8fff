import { createCustomer, CUSTOMER_COLUMNS, CUSTOMER_FROM, customerView, findCustomer, type CreateCustomerInput, type CustomerRow } from '../../shared/domain/customers.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import type { PageQuery } from '../../shared/db/pagination.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';
import { renderedPage } from '../rendered.js';

export const schemas: Record<string, JsonSchema> = {
  CustomerWalletSummary: {
    type: 'object',
    required: ['id', 'type', 'address', 'asset', 'supported_chains', 'ownership_status', 'status'],
    properties: {
      id: ref('Uuid'),
      type: { type: 'string', enum: ['managed_wallet'] },
      address: { type: 'string', description: 'EIP-55 checksummed EVM address; the same on every supported chain.' },
      asset: { type: 'string', enum: ['USDC'] },
      supported_chains: { type: 'array', items: ref('Chain') },
      ownership_status: { type: 'string', enum: ['managed'] },
      status: { type: 'string', enum: ['active', 'archived'] },
    },
  },
  CustomerMetadata: {
    type: 'object',
    maxProperties: 20,
    propertyNames: { minLength: 1, maxLength: 40 },
    additionalProperties: { type: 'string', maxLength: 500 },
    description: 'Up to 20 keys (1..40 characters) with string values of at most 500 characters.',
  },
  Customer: {
    type: 'object',
    required: ['id', 'external_reference', 'display_name', 'metadata', 'status', 'wallet', 'archived_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      external_reference: { type: 'string' },
      display_name: { type: ['string', 'null'] },
      metadata: ref('CustomerMetadata'),
      status: { type: 'string', enum: ['active', 'archived'] },
      wallet: ref('CustomerWalletSummary'),
      archived_at: { type: ['string', 'null'], format: 'date-time' },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  CreateCustomerRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['external_reference'],
    properties: {
      external_reference: { type: 'string', minLength: 1, maxLength: 128, description: 'Your own reference; unique per environment. Reusing it returns the existing customer.' },
      display_name: { type: 'string', minLength: 1, maxLength: 200 },
      metadata: ref('CustomerMetadata'),
    },
  },
  CustomerList: listOf('Customer'),
};

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/customers',
    operationId: 'createCustomer',
    summary: 'Create a customer with one managed USDC wallet.',
    description:
      'Creates the customer and derives its managed EVM wallet. An `external_reference` already used in this environment answers 200 with the existing customer and creates nothing.',
    tag: 'Customers',
    scope: 'customers:write',
    body: { schema: ref('CreateCustomerRequest'), examples: {
      customer: { summary: 'A customer with your own reference', value: { external_reference: 'cust_1042', display_name: 'Amina Wanjiru', metadata: { segment: 'retail' } } },
    } },
    responses: {
      '201': { description: 'Customer created, with its managed wallet.', schema: ref('Customer') },
      '200': { description: 'A customer with this external_reference already exists: it is returned unchanged.', schema: ref('Customer') },
    },
    handler: async ({ deps, auth, body, reply }) => reply(async (unit) => {
      const { created, customer } = await createCustomer(unit.em, deps.config.wallets, auth, body as CreateCustomerInput);
      return { status: created ? 201 : 200, body: customerView(customer) };
    }),
  },
  {
    method: 'get',
    path: '/customers',
    operationId: 'listCustomers',
    summary: 'List customers, newest first.',
    tag: 'Customers',
    scope: 'customers:read',
    query: {
      ...paginationQuery,
      external_reference: { schema: { type: 'string', minLength: 1, maxLength: 128 }, description: 'Only the customer with this external reference.' },
    },
    responses: { '200': { description: 'A page of customers.', schema: ref('CustomerList') } },
    handler: async ({ deps, auth, query, rendered }) => {
      const q = query as PageQuery & { external_reference?: string };
      const where = ['c.business_id = $1', 'c.environment = $2'];
      const params: unknown[] = [auth.businessId, auth.environment];
      if (q.external_reference !== undefined) {
        params.push(q.external_reference);
        where.push(`c.external_reference = $${params.length}`);
      }
      const list = { columns: CUSTOMER_COLUMNS, from: CUSTOMER_FROM, table: 'customers c', alias: 'c', where, params, view: customerView };
      return { status: 200, body: await renderedPage<CustomerRow>(deps.ds, list, q, rendered('a page\'s customers', 'Customer')) };
    },
  },
  {
    method: 'get',
    path: '/customers/{id}',
    operationId: 'getCustomer',
    summary: 'Retrieve a customer.',
    tag: 'Customers',
    scope: 'customers:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The customer.', schema: ref('Customer') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: customerView(await findCustomer(deps.ds, auth, (params as { id: string }).id)) }),
  },
];
