export * from './config';
export * from './runtime';
export * from './embedded-store';
export { compact } from './compaction';
export { listSegments } from './file-event-log';
export { lockDataDir } from './data-dir-lock';
export { lockDataDirOfKnownFormat } from './data-dir-format';
