import { proxyOp, desktopUp } from './proxy.js';

/** Extension (not in the spec): where the pointer is, without moving it. */
export default proxyOp({ name: 'machines.mouse_position', agent: 'mouse.position', check: desktopUp });
