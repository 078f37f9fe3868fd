import { loadClickHouseConfig } from '../src/config';

describe('ClickHouse configuration', () => {
  it('defaults to the local server and the database `pushbase`; blank means default', () => {
    expect(loadClickHouseConfig({})).toEqual({ url: 'http://127.0.0.1:8123', database: 'pushbase', viewsDatabase: 'pushbase_views' });
    expect(loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_URL: ' ', PUSHBASE_CLICKHOUSE_DATABASE: '' })).toEqual({ url: 'http://127.0.0.1:8123', database: 'pushbase', viewsDatabase: 'pushbase_views' });
  });

  it('takes a URL and a database name', () => {
    expect(loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_URL: 'https://ch.internal:8443', PUSHBASE_CLICKHOUSE_DATABASE: 'pb_prod' })).toEqual({
      url: 'https://ch.internal:8443',
      database: 'pb_prod',
      viewsDatabase: 'pb_prod_views',
    });
    expect(loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_DATABASE: 'pb_prod', PUSHBASE_CLICKHOUSE_VIEWS_DATABASE: 'grafana' }).viewsDatabase).toBe('grafana');
  });

  it('asks for the views database by name when the database is too long to derive it from', () => {
    expect(() => loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_DATABASE: 'd'.repeat(63) })).toThrow(/PUSHBASE_CLICKHOUSE_VIEWS_DATABASE/);
    expect(loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_DATABASE: 'd'.repeat(63), PUSHBASE_CLICKHOUSE_VIEWS_DATABASE: 'v' }).viewsDatabase).toBe('v');
  });

  it.each([
    [{ PUSHBASE_CLICKHOUSE_URL: 'not a url' }, /PUSHBASE_CLICKHOUSE_URL/],
    [{ PUSHBASE_CLICKHOUSE_URL: 'ftp://host' }, /PUSHBASE_CLICKHOUSE_URL/],
    [{ PUSHBASE_CLICKHOUSE_DATABASE: 'pushbase; DROP' }, /PUSHBASE_CLICKHOUSE_DATABASE/],
    [{ PUSHBASE_CLICKHOUSE_DATABASE: '1db' }, /PUSHBASE_CLICKHOUSE_DATABASE/],
    [{ PUSHBASE_CLICKHOUSE_DATABASE: 'db`x' }, /PUSHBASE_CLICKHOUSE_DATABASE/],
    [{ PUSHBASE_CLICKHOUSE_VIEWS_DATABASE: 'views.x' }, /PUSHBASE_CLICKHOUSE_VIEWS_DATABASE/],
  ])('refuses %j', (env, message) => {
    expect(() => loadClickHouseConfig(env)).toThrow(message);
  });
});
