// The Redis adapters: RateLimiter, SchemaStore (with its writer side), KeyStore.
export * from './keys';
export * from './rate-limiter';
export * from './schema-store';
export * from './schema-intent';
export * from './schema-hold';
export * from './key-store';
export * from './account-store';
export * from './connection';
export * from './config';
export * from './generations';
export * from './state';
export type { Redis } from 'ioredis';
export * from './idempotency';
