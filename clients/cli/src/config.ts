/**
 * Where `computer login` keeps the API key: `$XDG_CONFIG_HOME/computer/config.json` (else
 * `~/.config/computer/config.json`), the file 0600 in a 0700 directory, because it holds a credential.
 * COMPUTER_API_KEY / COMPUTER_BASE_URL override what is stored.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export const CliConfig = z.object({
  base_url: z.url({ protocol: /^https?$/ }),
  api_key: z.string().min(1),
});
export type CliConfig = z.infer<typeof CliConfig>;

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(os.homedir(), '.config');
  return path.join(base, 'computer', 'config.json');
}

/** The stored config, or null when there is none; a malformed file is an error naming the file. */
export function loadConfig(file = configPath()): CliConfig | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`${file} is not valid JSON; run \`computer login\` again`);
  }
  const r = CliConfig.safeParse(raw);
  if (!r.success) throw new Error(`${file} is not a computer config; run \`computer login\` again`);
  return r.data;
}

/**
 * Writes the config through a 0600 temporary file renamed over the old one, so the key is never
 * readable by others, not even for a moment, and a crash never leaves half a file. The directory is
 * made (or tightened to) 0700.
 */
export function saveConfig(cfg: CliConfig, file = configPath()): void {
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeFileSync(fd, JSON.stringify(cfg, null, 2) + '\n');
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/** Environment first, then the stored file, then the default base URL; null without any key. */
export function resolveConfig(env: NodeJS.ProcessEnv = process.env): CliConfig | null {
  const stored = loadConfig(configPath(env));
  const api_key = env.COMPUTER_API_KEY || stored?.api_key;
  if (!api_key) return null;
  return { api_key, base_url: env.COMPUTER_BASE_URL || stored?.base_url || DEFAULT_BASE_URL };
}
