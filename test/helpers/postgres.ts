/** The throwaway PostgreSQL rig for tests: the cluster code is shared with the bench (scripts/lib/throwaway-postgres.ts). */
export * from '../../scripts/lib/throwaway-postgres.js';
