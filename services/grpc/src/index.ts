export * from './errors';
export * from './flow-control';
export * from './log';
export * from './options';
export * from './request-id';
export * from './server';
export * from './clients';
export { summaryFromMessage, summaryToMessage } from './messages';
export * from './trace-context';
