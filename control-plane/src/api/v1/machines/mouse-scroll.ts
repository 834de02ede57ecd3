import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.mouse_scroll', agent: 'mouse.scroll', permission: 'machines:control', lease: true });
