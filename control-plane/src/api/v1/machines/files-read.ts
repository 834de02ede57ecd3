import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.files_read', agent: 'files.read' });
