import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.mouse_move', agent: 'mouse.move', permission: 'machines:control', lease: true });
