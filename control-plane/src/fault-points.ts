/**
 * Named points where the fault drills (test/faults/) kill the control plane: a control plane run as a child
 * process with COMPUTER_FAULT_POINT=<name> SIGKILLs itself when it reaches that point, so a crash lands exactly
 * between two steps of an operation. Unset (production) it is one string compare.
 */
export function faultPoint(name: string): void {
  if (process.env.COMPUTER_FAULT_POINT === name) process.kill(process.pid, 'SIGKILL');
}
