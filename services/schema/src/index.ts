// The distributed schema service (`pushbase schema`).
export * from './account-lock';
export * from './changes';
export * from './accounts';
export * from './config';
export * from './service';
export * from './server';
export * from './main';
