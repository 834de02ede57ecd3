import { proxyOp, rootNeedsControl } from './proxy.js';

export default proxyOp({ name: 'machines.files_list', agent: 'files.list', needs: rootNeedsControl });
