/**
 * Whether QEMU can use KVM on this host. The decision is pure (facts in, verdict out) so it is tested
 * without the hardware; gathering the facts only reads /dev, /proc and /sys and never starts a guest, so a
 * /dev/kvm that would hang a stock kernel (PVM nested virtualization) is refused without hanging.
 */
import fs from 'node:fs';

export interface KvmFacts {
  devKvm: boolean;
  /** CPU flags include vmx (Intel) or svm (AMD). */
  hwVirt: boolean;
  /** Names under /sys/module that start with kvm (kvm, kvm_intel, kvm_amd, kvm_pvm, …). */
  kvmModules: string[];
}

export type KvmVerdict = { usable: true } | { usable: false; reason: 'no_dev_kvm' | 'no_hw_virt' | 'pvm' | 'no_vendor_module' };

export function decideKvm(f: KvmFacts): KvmVerdict {
  if (!f.devKvm) return { usable: false, reason: 'no_dev_kvm' };
  // PVM (kvm_pvm) runs only guests built for it (CONFIG_PVM_GUEST); a stock Debian kernel hangs under it.
  if (f.kvmModules.includes('kvm_pvm')) return { usable: false, reason: 'pvm' };
  if (!f.hwVirt) return { usable: false, reason: 'no_hw_virt' };
  if (!f.kvmModules.some((m) => m === 'kvm_intel' || m === 'kvm_amd')) return { usable: false, reason: 'no_vendor_module' };
  return { usable: true };
}

export function gatherKvmFacts(paths = { dev: '/dev/kvm', cpuinfo: '/proc/cpuinfo', modules: '/sys/module' }): KvmFacts {
  let cpuinfo = '';
  try {
    cpuinfo = fs.readFileSync(paths.cpuinfo, 'utf8');
  } catch {
    /* no cpuinfo: no hw virt */
  }
  let mods: string[] = [];
  try {
    mods = fs.readdirSync(paths.modules).filter((m) => m.startsWith('kvm'));
  } catch {
    /* no sysfs */
  }
  return {
    devKvm: fs.existsSync(paths.dev),
    hwVirt: /^flags\s*:.*\b(vmx|svm)\b/m.test(cpuinfo),
    kvmModules: mods,
  };
}

export function probeKvm(): KvmVerdict {
  return decideKvm(gatherKvmFacts());
}

/** The host's TSC rate in kHz from /proc/cpuinfo (`cpu MHz`), or null when it cannot be read. */
export function hostTscKhz(cpuinfoPath = '/proc/cpuinfo'): number | null {
  try {
    const m = /^cpu MHz\s*:\s*([0-9.]+)/m.exec(fs.readFileSync(cpuinfoPath, 'utf8'));
    return m ? Math.round(Number(m[1]) * 1000) : null;
  } catch {
    return null;
  }
}
