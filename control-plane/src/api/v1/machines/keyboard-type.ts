import { KeyboardTypeRequest } from '../../../../../shared/schemas/input.js';
import { secretTypingBody } from '../../../services/machine-agent/index.js';
import { machineIdParam, proxyOp } from './proxy.js';

/**
 * `{text}` is typed as given. `{secret: NAME}` types the stored value of that secret (typed by
 * reference: the value goes from storage to the machine's keyboard and nowhere else).
 */
export default proxyOp({
  name: 'machines.keyboard_type',
  agent: 'keyboard.type',
  permission: 'machines:control',
  lease: true,
  body: KeyboardTypeRequest,
  toAgent: async (b: KeyboardTypeRequest, c, s) => {
    const bySecret = await secretTypingBody(b, (name) => s.secrets.valueForTyping(c.get('orgPrincipal').org_id, machineIdParam(c), name));
    return bySecret === null
      ? { body: JSON.stringify({ text: b.text, delay_ms: b.delay_ms, settle: b.settle }), sensitive: false }
      : { body: bySecret, sensitive: true };
  },
});
