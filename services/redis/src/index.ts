// The Redis adapters: RateLimiter, SchemaStore, KeyStore.
export {};
