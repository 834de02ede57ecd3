import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.terminals_kill', agent: 'terminals.kill', permission: 'machines:control' });
