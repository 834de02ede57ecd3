import { findPlan } from '../../../domain/catalog.js';
import { defineOp } from '../../op.js';
import { ERRORS } from '../../../errors.js';

const esc = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/**
 * The built-in provider's customer portal: one page showing the subscription, with a cancel button
 * while there is something to cancel. It takes no payment details because it takes no money.
 */
export default defineOp({
  name: 'billing.builtin.portal',
  method: 'get',
  path: '/billing/portal/:token',
  auth: 'none',
  responses: { 200: 'html' },
  async handler(c, s) {
    if (!s.builtin) throw ERRORS.builtinBillingNotInUse();
    const token = c.req.param('token');
    const link = await s.builtin.portalLink(token);
    if (!link) throw ERRORS.unknownPortalLink();
    const a = await s.billing.account(link.org_id);
    const plan = a.plan_id ? findPlan(s.billing.catalogFor(a), a.plan_id) : undefined;
    const cancellable = a.state === 'trialing' || a.state === 'active' || a.state === 'past_due';
    const html = `<!doctype html><html><head><meta charset="utf-8"><title>Subscription</title></head><body>
<h1>Subscription</h1>
<p>Plan: ${esc(plan?.name ?? 'none')}</p>
<p>State: <span id="state">${esc(a.state)}</span></p>
${a.trial_ends_at ? `<p>Trial ends: ${esc(a.trial_ends_at)}</p>` : ''}
${cancellable ? `<form method="post" action="${esc(`${s.config.publicBaseUrl}/v1/billing/portal/${token}/cancel`)}"><button type="submit">Cancel subscription</button></form>` : ''}
${link.return_url ? `<p><a href="${esc(link.return_url)}">Back</a></p>` : ''}
</body></html>`;
    c.header('cache-control', 'no-store');
    c.header('referrer-policy', 'no-referrer');
    // Never framed: inside another site's frame the cancel button's post carries our own Origin, so the
    // Origin check would not stop a clickjacked cancellation.
    c.header('content-security-policy', "default-src 'none'; form-action 'self'; frame-ancestors 'none'");
    c.header('x-frame-options', 'DENY');
    return c.html(html);
  },
});
