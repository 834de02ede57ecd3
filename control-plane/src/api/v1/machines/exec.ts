import { proxyOp, execTimeout } from './proxy.js';

export default proxyOp({ name: 'machines.exec', agent: 'exec', permission: 'machines:control', timeoutMs: execTimeout });
