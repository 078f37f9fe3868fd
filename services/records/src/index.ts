// The distributed record-command service (`pushbase records`).
export * from './config';
export * from './schema-cache';
export * from './server';
export * from './main';
