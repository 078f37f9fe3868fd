// The ClickHouse projection: migrations, the records and heads tables, and one adapter per port (the
// projector's ProjectionStore, the ReadModel, a SchemaStore view of the heads).
export { connectClickHouse, storeError, type ClickHouseConnection } from './client';
export { loadClickHouseConfig, clickhouseEnv, viewsDatabaseOf, type ClickHouseConfig } from './config';
export { DatasetViews, defaultViewsDatabase, viewName, viewQuery } from './views';
export { columnsOf, slotsOf, type Slot, type SlotKind } from './layout';
export { INDEX_GRANULARITY, migrate, MIGRATIONS, promoteStatement, tablesIn, TABLE_NAMES, type Migration, type MigrateResult, type ProjectionTables } from './migrations';
export { accountLiteral, checkAccount, datasetLiteral, quoteIdentifier, quoteString } from './sql';
export { ClickHouseProjectionStore, MAX_INSERT_BYTES, MAX_INSERT_ROWS, MAX_LOAD_DATASETS } from './write-store';
export { ClickHouseReadModel } from './read-model';
export { ClickHouseHeadsStore } from './heads-store';
export { databaseExists, dropDatabase, listListedHeads, listStoredHeads, promoteProjection, type ListedHead, type StoredHead } from './inventory';
