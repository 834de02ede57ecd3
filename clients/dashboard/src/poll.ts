/** Runs `load` now and every `ms` while the component is mounted (lists and states that others change). */
import { useEffect } from 'preact/hooks';

export function usePoll(load: () => Promise<void>, ms: number, deps: unknown[]): void {
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), ms);
    return () => clearInterval(t);
  }, deps);
}
