export * from './ports';
export * from './proto';
