import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.mouse_click', agent: 'mouse.click', permission: 'machines:control', lease: true });
