import type { Environment } from './chains.js';

export interface EventScope {
  businessId: string;
  environment: Environment;
}
