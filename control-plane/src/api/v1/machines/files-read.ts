import { proxyOp, rootNeedsControl } from './proxy.js';

export default proxyOp({ name: 'machines.files_read', agent: 'files.read', needs: rootNeedsControl });
