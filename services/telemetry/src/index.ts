export * from './config';
export * from './logger';
export * from './tracing';
