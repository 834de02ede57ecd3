// The usage suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts).
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/usage.test.js');
