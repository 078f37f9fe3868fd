// The Kafka adapters of the EventLog port: the appender (producer) and the dataset-event consumer.
export {};
