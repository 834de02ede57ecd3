import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.mouse_drag', agent: 'mouse.drag', permission: 'machines:control', lease: true });
