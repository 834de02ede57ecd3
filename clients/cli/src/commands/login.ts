/**
 * computer login: checks the key against the server, then stores it (0600, config.ts). The key comes from
 * --api-key, COMPUTER_API_KEY, or stdin (a hidden prompt on a terminal); prefer the latter two, as argv
 * is visible to other local users.
 */
import { Computer, ComputerError } from '../../../sdk/src/index.js';
import { type Command, str } from '../command.js';
import { configPath, DEFAULT_BASE_URL, loadConfig, saveConfig, CliConfig } from '../config.js';
import { UsageError } from '../output.js';
import { readSecret } from '../prompt.js';

export const login: Command = {
  usage: 'login [--base-url URL] [--api-key KEY]   (else COMPUTER_API_KEY, else stdin)',
  summary: 'store an API key and server URL for later commands',
  options: { 'base-url': { type: 'string' }, 'api-key': { type: 'string' } },
  positionals: [],
  async run({ values }, ctx) {
    const file = configPath(ctx.env);
    const base_url = (str(values['base-url']) ?? ctx.env.COMPUTER_BASE_URL ?? loadConfig(file)?.base_url ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    const api_key = str(values['api-key']) ?? (ctx.env.COMPUTER_API_KEY || (await readSecret('API key: ', ctx.stdin, ctx.err))).trim();
    const cfg = CliConfig.safeParse({ base_url, api_key });
    if (!cfg.success) throw new UsageError(api_key ? `the base URL must be an http(s) URL: ${base_url}` : 'no API key given');
    // Only a key the server accepts is stored. A key without machines:read still authenticates.
    try {
      await new Computer({ apiKey: api_key, baseUrl: base_url, retries: 1 }).listMachines({ limit: 1 });
    } catch (e) {
      if (!(e instanceof ComputerError && e.code === 'permission_denied')) throw e;
    }
    saveConfig(cfg.data, file);
    ctx.err.write(`logged in to ${base_url}; key stored in ${file}\n`);
  },
};
