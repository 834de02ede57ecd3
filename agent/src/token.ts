import fs from 'node:fs';

export const FWCFG_ROOT = '/sys/firmware/qemu_fw_cfg/by_name';

/**
 * Load the machine token. A token file readable by anyone but its owner is refused: the token is
 * the only thing standing between a guest process and the control channel.
 */
export function loadToken(src: { tokenFile?: string; tokenFwcfg?: string }, fwcfgRoot = FWCFG_ROOT): { token: string; path: string } {
  let path: string;
  if (src.tokenFile) {
    path = src.tokenFile;
    const st = fs.statSync(path);
    if ((st.mode & 0o077) !== 0) throw new Error('token file must not be accessible to group or others (chmod 600)');
  } else if (src.tokenFwcfg) {
    if (!/^[A-Za-z0-9_./-]+$/.test(src.tokenFwcfg) || src.tokenFwcfg.includes('..')) throw new Error('bad fw_cfg name');
    path = `${fwcfgRoot}/${src.tokenFwcfg}/raw`;
  } else {
    throw new Error('no token source');
  }
  const token = fs.readFileSync(path, 'utf8').trim();
  if (token.length < 16) throw new Error('token is too short (need at least 16 characters)');
  return { token, path };
}
