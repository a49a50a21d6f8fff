import type { JsonSchema, RouteDef } from './route.js';
import * as account from './account.route.js';
import * as beneficiaries from './beneficiaries.route.js';
import * as customers from './customers.route.js';
import * as wallets from './wallets.route.js';
import * as walletBalance from './wallet-balance.route.js';
import * as sandbox from './sandbox.route.js';
import * as walletVerification from './wallet-verification.route.js';
import * as corridors from './corridors.route.js';
import * as onrampsReadiness from './onramps-readiness.route.js';
import * as quotes from './quotes.route.js';
import * as ramps from './ramps.route.js';
import * as transactions from './transactions.route.js';
import * as paymentIntents from './payment-intents.route.js';
import * as treasury from './treasury.route.js';
import * as treasuryWithdrawals from './treasury-withdrawals.route.js';
import * as payoutBatches from './payout-batches.route.js';
import * as webhooks from './webhooks.route.js';
import * as liquidationAddresses from './liquidation-addresses.route.js';

// Every resource module exports `routes` and `schemas`; add new ones here.
const modules: { routes: RouteDef[]; schemas: Record<string, JsonSchema> }[] = [account, customers, wallets, beneficiaries, walletBalance, sandbox, walletVerification, corridors, onrampsReadiness, quotes, ramps, transactions, paymentIntents, treasury, treasuryWithdrawals, payoutBatches, webhooks, liquidationAddresses];

export const routes: RouteDef[] = modules.flatMap((m) => m.routes);
export const schemas: Record<string, JsonSchema> = Object.assign({}, ...modules.map((m) => m.schemas));
