export * from './types';
export * from './errors';
export * from './time';
export * from './definition';
export * from './records';
export * from './events';
export * from './fold';
export * from './decide';
