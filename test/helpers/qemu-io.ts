/** Writing and reading back 1 MiB patterns in qcow2 images with qemu-io (qcow2 layer tests). */
import { execFileSync } from 'node:child_process';

export function writePattern(file: string, pattern: number, offsetMb: number): void {
  execFileSync('qemu-io', ['-f', 'qcow2', '-c', `write -P ${pattern} ${offsetMb}M 1M`, file], { stdio: 'ignore' });
}

/** Whether 1 MiB at the offset reads back as the pattern, through the image's whole backing chain. */
export function readsPattern(file: string, pattern: number, offsetMb: number): boolean {
  try {
    execFileSync('qemu-io', ['-r', '-f', 'qcow2', '-c', `read -P ${pattern} ${offsetMb}M 1M`, file], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
