// The sessions-idle suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts).
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/sessions-idle.test.js');
