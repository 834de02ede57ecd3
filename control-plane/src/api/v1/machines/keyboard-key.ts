import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.keyboard_key', agent: 'keyboard.key', permission: 'machines:control', lease: true });
