// The secrets suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts): stored, delivered, typed by reference,
// sealed at rest and rotated on the other engine too.
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/secrets.test.js');
