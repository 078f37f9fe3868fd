// The Kafka adapters of the event log: the appender (producer), the dataset-event consumer, the EventLog
// built from both, and the topic they share.
export * from './connection';
export * from './messages';
export * from './consumer';
export * from './topic';
export * from './group-offsets';
export * from './appender';
export * from './event-log';
export * from './account-log';
export * from './projection-progress';
export * from './config';
