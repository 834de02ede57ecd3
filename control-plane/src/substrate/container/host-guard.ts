/** The host guard is shared by both substrates; it lives in ../host-guard.ts. */
export { DEFAULT_BRIDGE, GUARD_CHAIN, guardRules, installHostGuard } from '../host-guard.js';
