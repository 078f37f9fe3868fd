export * from './services';
export * from './keyed-mutex';
export * from './memory-projection';
export * from './memory-event-log';
