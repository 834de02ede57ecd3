import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.terminals_resize', agent: 'terminals.resize', permission: 'machines:control' });
