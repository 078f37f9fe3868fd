export * from './config';
export * from './logger';
export * from './tracing';
export * from './redact';
