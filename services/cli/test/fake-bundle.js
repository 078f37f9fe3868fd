// Stands in for dist/pushbase.js in the supervisor's tests: `node fake-bundle.js <service>` behaves like
// the service as the supervisor sees it (its ready line, a real listening port, SIGTERM → exit 0), and
// appends "<event> <service>" lines to FAKE_EVENTS so the tests can tell the order things happened in.
// FAKE_PIDS: a file it appends "<service> <pid>" to. FAKE_FAILS: the service that exits 1 at once.
// FAKE_READY_AFTER_MS: how long the others take to be ready.
'use strict';
const { appendFileSync } = require('node:fs');
const net = require('node:net');
const { setInterval, setTimeout } = require('node:timers');

const service = process.argv[2];
const note = (event) => appendFileSync(process.env.FAKE_EVENTS, `${event} ${service}\n`);
const say = (fields) => process.stdout.write(`${JSON.stringify({ service, ...fields })}\n`);

note('start');
if (service === 'migrate') {
  say({ msg: 'migrations applied' });
  if (process.env.FAKE_MIGRATE_FAILS === 'true') {
    process.stderr.write('cannot reach ClickHouse\n');
    process.exit(3);
  }
  process.exit(0);
}
if (process.env.FAKE_PIDS) appendFileSync(process.env.FAKE_PIDS, `${service} ${process.pid}\n`);
if (process.env.FAKE_FAILS === service) {
  process.stderr.write('cannot bind its port\n');
  process.exit(1);
}
const readyAfterMs = Number(process.env.FAKE_READY_AFTER_MS ?? 0);
process.on('SIGTERM', () => {
  note('stop');
  say({ msg: 'stopped' });
  // A little drain time, so an order that is not awaited would show.
  setTimeout(() => process.exit(0), 100);
});
const portOf = { schema: 'PUSHBASE_SCHEMA_GRPC_PORT', records: 'PUSHBASE_RECORDS_GRPC_PORT', gateway: 'PUSHBASE_PORT' }[service];
if (portOf === undefined) {
  setTimeout(() => say({ msg: 'partitions assigned', partitions: [0] }), 50 + readyAfterMs);
  setInterval(() => undefined, 1000);
} else {
  const server = net.createServer();
  server.listen(Number(process.env[portOf] ?? 0), '127.0.0.1', () => {
    const port = server.address().port;
    const ready = () => {
      if (service === 'gateway') say({ msg: 'listening', port, admin_port: port + 1, cert_file: null, schema: process.env.PUSHBASE_SCHEMA_ADDRESS, records: process.env.PUSHBASE_RECORDS_ADDRESS });
      else say({ msg: 'listening', grpc_port: port });
    };
    setTimeout(ready, readyAfterMs);
  });
}
