// The ClickHouse read model: migrations, the records and heads tables, the ReadModel adapter.
export {};
