// The gateway's events suite, unchanged, on PostgreSQL (its rig opens the store through test/helpers/rig-db.ts):
// issue 24's "the API, quota, lease, events and crash suites also pass on Postgres".
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../gateway/gateway-events.test.js');
