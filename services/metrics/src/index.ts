export * from './registry';
export * from './instruments';
export * from './listener';
export * from './config';
