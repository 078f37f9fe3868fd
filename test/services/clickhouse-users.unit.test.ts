import { usersConfig } from '../../deploy/local/clickhouse';

describe('the local ClickHouse users.xml', () => {
  it("sets background_pool_size inside the default profile, after comments, and keeps the rest of Debian's file", () => {
    const debian = '<yandex>\n  <profiles>\n    <!-- Default settings. -->\n    <default>\n      <max_memory_usage>1</max_memory_usage>\n    </default>\n  </profiles>\n  <users><default></default></users>\n</yandex>\n';
    const got = usersConfig(debian, 2);
    expect(got).toContain('<default>\n            <background_pool_size>2</background_pool_size>\n      <max_memory_usage>1</max_memory_usage>');
    expect(got.replace('\n            <background_pool_size>2</background_pool_size>', '')).toBe(debian);
    expect(got.match(/background_pool_size/g)).toHaveLength(2);
  });

  it('refuses a users.xml without a default profile rather than start ClickHouse unconfigured', () => {
    expect(() => usersConfig('<yandex><users><default></default></users></yandex>', 2)).toThrow(/no <profiles><default>/);
  });

});
