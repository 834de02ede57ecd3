import { proxyOp } from './proxy.js';

export default proxyOp({ name: 'machines.browser_open', agent: 'browser.open', permission: 'machines:control', lease: true });
