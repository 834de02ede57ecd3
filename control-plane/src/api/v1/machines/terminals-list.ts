import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.terminals_list', agent: 'terminals.list' });
