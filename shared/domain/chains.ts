export const CHAINS = ['base', 'polygon', 'arbitrum', 'optimism', 'avalanche'] as const;
export type Chain = (typeof CHAINS)[number];

export const CHAIN_IDS: Record<Chain, number> = {
  base: 8453,
  polygon: 137,
  arbitrum: 42161,
  optimism: 10,
  avalanche: 43114,
};

export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
