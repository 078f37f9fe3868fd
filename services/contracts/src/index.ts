export * from './ports';
export * from './proto';
export * from './projection';
export * from './event-codec';
export * from './request-scope';
export * from './account-codec';
export * from './key-material';
