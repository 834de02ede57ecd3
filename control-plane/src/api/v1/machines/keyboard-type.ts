import { KeyboardTypeRequest } from '../../../../../shared/schemas/input.js';
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
  toAgent: (b: KeyboardTypeRequest, c, s) =>
    b.secret === undefined
      ? { body: JSON.stringify({ text: b.text, delay_ms: b.delay_ms, settle: b.settle }), sensitive: false }
      : {
          // Settling works by reference too, but without the after-screenshot: the field the secret
          // was typed into may show it, and an answer to a typing-by-reference call never carries it.
          body: JSON.stringify({
            text: s.secrets.valueForTyping(c.get('orgPrincipal').org_id, machineIdParam(c), b.secret),
            delay_ms: b.delay_ms,
            settle: b.settle ? { ...b.settle, screenshot: undefined } : undefined,
          }),
          sensitive: true,
        },
});
