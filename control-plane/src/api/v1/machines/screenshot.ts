import { proxyOp, desktopUp } from './proxy.js';

export default proxyOp({ name: 'machines.screenshot', agent: 'screenshot', check: desktopUp });
