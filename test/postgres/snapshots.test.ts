// The snapshots suite, unchanged, on PostgreSQL (test/helpers/rig-db.ts): captures, restore, fork, templates, their
// quotas and the reconciler after a crash mid-capture, on the fake substrate.
process.env.COMPUTER_TEST_ENGINE = 'postgres';
await import('../control-plane/snapshots.test.js');
