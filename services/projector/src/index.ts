// The projector: a Kafka consumer group folding dataset events into ClickHouse with the domain's evolve.
export * from './project';
export * from './slots';
export * from './projector';
export * from './config';
export * from './main';
export * from './replay';
export * from './verify';
export * from './priority';
