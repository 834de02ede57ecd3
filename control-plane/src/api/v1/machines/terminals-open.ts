import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.terminals_open', agent: 'terminals.open', permission: 'machines:control' });
