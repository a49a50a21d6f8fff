// Whether a customer can take new wallets, beneficiaries and addresses: apart from customers.ts, which creates
// customers with their managed wallets (and so reads wallets.ts).
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import type { EventScope } from './events.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';

/** For resources that name a customer_id: it must exist in this business and environment (404) and be active (409). */
export async function assertActiveCustomer(q: Pick<DataSource | EntityManager, 'query'>, scope: EventScope, customerId: string): Promise<void> {
  const rows: { status: string }[] = await q.query(
    planOnce(`SELECT status FROM customers WHERE ${byIdInScope()}`),
    [customerId, scope.businessId, scope.environment],
  );
  if (!rows[0]) throw new AppError('not_found', 'No such customer.', { param: 'customer_id' });
  if (rows[0].status !== 'active') throw new AppError('resource_archived', 'This customer is archived.', { customer_id: customerId });
}
