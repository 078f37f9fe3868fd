export * from './services';
export * from './write-decider';
export * from './write-pool';
export * from './keyed-mutex';
export * from './memory-projection';
export * from './memory-event-log';
export * from './accounts';
export * from './idempotency';
