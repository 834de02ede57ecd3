import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.clipboard_set', agent: 'clipboard.set', permission: 'machines:control', lease: true });
