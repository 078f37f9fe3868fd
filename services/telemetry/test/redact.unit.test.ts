import { redactCredentials, redactUrl } from '../src';

it('removes the user-info of a URL and leaves everything else', () => {
  expect(redactUrl('http://default:s3cret@clickhouse:8123/?x=1')).toBe('http://***@clickhouse:8123/?x=1');
  expect(redactUrl('redis://:pw@redis:6379/0')).toBe('redis://***@redis:6379/0');
  expect(redactUrl('http://clickhouse:8123')).toBe('http://clickhouse:8123');
  expect(redactUrl('kafka-0:9092,kafka-1:9092')).toBe('kafka-0:9092,kafka-1:9092');
});

it('redacts every URL in a text, and no e-mail address or path outside one', () => {
  expect(redactCredentials('from http://a:b@x/ to rediss://c:d@y:6380 by ops@example.com at /srv/a@b')).toBe('from http://***@x/ to rediss://***@y:6380 by ops@example.com at /srv/a@b');
});
