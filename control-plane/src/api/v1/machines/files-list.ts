import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.files_list', agent: 'files.list' });
