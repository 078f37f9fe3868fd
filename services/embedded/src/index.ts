export * from './config';
export * from './runtime';
export * from './tls';
export * from './embedded-store';
