import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.keyboard_hotkey', agent: 'keyboard.hotkey', permission: 'machines:control', lease: true });
