import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.keyboard_type', agent: 'keyboard.type', permission: 'machines:control', lease: true });
