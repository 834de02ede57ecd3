import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.files_write', agent: 'files.write', permission: 'machines:control' });
