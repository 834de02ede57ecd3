// The create/delete crash drill (test/faults/create-delete-crash.test.ts) on PostgreSQL: the crash child opens the
// test's database (helpers/rig-db.ts), so a kill -9 lands between the store's commit and the substrate's act on a
// real PostgreSQL. Issue 24: "the crash suites also pass on Postgres".
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../faults/create-delete-crash.test.js');
