// The billing suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts): billing events of one instant read back in
// the order they were recorded (migration 12), as on SQLite.
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/billing.test.js');
