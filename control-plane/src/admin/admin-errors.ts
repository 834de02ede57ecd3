/**
 * computer-admin's refusals, one factory each, with the exit code the command ends with: 2 for a command line it
 * cannot run (usage, a command not available yet), 1 for a refusal of what was asked.
 */
export class AdminError extends Error {
  override name = 'AdminError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
  }
}

export const ADMIN_USAGE = [
  'usage: computer-admin hosts list [--json]',
  '       computer-admin hosts cordon|uncordon HOST',
  '       computer-admin hosts drain HOST [--json]',
  'reads DATABASE_URL (PostgreSQL), else DATA_DIR (default ./data) for the SQLite deployment',
].join('\n');

export const ADMIN_ERRORS = {
  usage: () => new AdminError(ADMIN_USAGE, 2),
  notHostId: () => new AdminError('HOST must be a host id (host_ and 20-32 of [0-9a-z]; `computer-admin hosts list` shows them)', 2),
  drainNeedsPostgres: () => new AdminError('hosts drain needs a PostgreSQL deployment (DATABASE_URL): a SQLite deployment is one host, with nowhere to move machines to', 1),
  noSuchHost: (id: string) => new AdminError(`no host ${id}`, 1),
  refused: (id: string, reason: string) => new AdminError(`refused: ${id}: ${reason}`, 1),
  notPostgres: () => new AdminError('DATABASE_URL must be a postgres:// or postgresql:// URL', 2),
  noDeployment: (file: string) => new AdminError(`no deployment at ${file} (set DATABASE_URL, or DATA_DIR to the control plane's)`, 1),
};
