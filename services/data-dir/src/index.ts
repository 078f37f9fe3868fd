export * from './fs';
export * from './files';
export * from './tls';
export * from './side-files';
