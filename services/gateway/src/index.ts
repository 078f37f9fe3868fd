export * from './app';
export * from './admin';
export * from './errors';
export * from './keys';
export * from './rate-limit';
export * from './trusted-proxies';
export * from './listeners';
export * from './listener-config';
