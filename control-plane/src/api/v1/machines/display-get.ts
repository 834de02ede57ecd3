import { proxyOp, desktopUp } from './proxy.js';

export default proxyOp({ name: 'machines.display_get', agent: 'display.get', check: desktopUp });
