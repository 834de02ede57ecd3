// The capture crash drill (test/faults/capture-crash.test.ts) on PostgreSQL: the crash child opens the test's
// database (helpers/rig-db.ts), so a kill -9 lands after the substrate captured and before the record says so (and
// before the substrate acted) on a real PostgreSQL. Issue 24: "the crash suites also pass on Postgres".
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../faults/capture-crash.test.js');
