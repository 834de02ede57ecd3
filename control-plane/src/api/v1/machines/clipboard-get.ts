import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.clipboard_get', agent: 'clipboard.get' });
