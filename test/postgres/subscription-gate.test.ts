// The subscription-gate suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts): issue 24's "the API, quota, lease, events and
// crash suites also pass on Postgres".
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/subscription-gate.test.js');
