import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.display_resize', agent: 'display.resize', permission: 'machines:control', lease: true });
