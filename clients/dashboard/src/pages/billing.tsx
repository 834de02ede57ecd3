/** Billing: account state, the trial checkout through the billing provider, the portal, usage summary and chart. */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, errorText } from '../api.js';
import type { UsageSeries as Series, UsageSummary as Summary } from '../../../../shared/schemas/usage.js';
import type { Billing, Me, PlanList } from '../types.js';

export function BillingPage({ me }: { me: Me }) {
  const [billing, setBilling] = useState<Billing | null>(null);
  const [plans, setPlans] = useState<PlanList | null>(null);
  const [summary, setSummary] = useState<Summary | null>(null);
  const [error, setError] = useState<string | null>(null);
  const canManage = me.permissions.includes('billing:manage');
  useEffect(() => {
    api<Billing>('GET', '/v1/billing').then((b) => {
      setBilling(b);
      // An account that never had a period has no summary (the route answers 404).
      if (b.period) api<Summary>('GET', '/v1/billing/usage-summary').then(setSummary, () => setSummary(null));
    }, (e) => setError(errorText(e)));
    api<PlanList>('GET', '/v1/plans').then(setPlans, () => {});
  }, [me.organization?.id]);

  const checkout = async (planId: string) => {
    try {
      const { url } = await api<{ url: string }>('POST', '/v1/billing/checkout', { plan_id: planId, success_url: `${location.origin}/billing` });
      // The provider's page (built-in: completes at once) sends the browser back to /billing.
      location.assign(url);
    } catch (e) {
      setError(errorText(e));
    }
  };
  const portal = async () => {
    try {
      const { url } = await api<{ url: string }>('POST', '/v1/billing/portal', { return_url: `${location.origin}/billing` });
      location.assign(url);
    } catch (e) {
      setError(errorText(e));
    }
  };
  const subscribed = billing && ['trialing', 'active', 'past_due'].includes(billing.state);
  return (
    <section class="billing">
      <h1>Billing</h1>
      {error && <p role="alert" class="error">{error}</p>}
      {billing && (
        <dl class="facts">
          <dt>State</dt><dd data-billing-state={billing.state}>{billing.state}</dd>
          <dt>Plan</dt><dd>{billing.plan?.name ?? 'none'}</dd>
          {billing.trial_ends_at && (<><dt>Trial ends</dt><dd>{new Date(billing.trial_ends_at).toLocaleString()}</dd></>)}
        </dl>
      )}
      {billing && !subscribed && plans && (
        <div class="plans">
          <h2>Choose a plan</h2>
          {!canManage && <p>Only an owner can subscribe this organization.</p>}
          <ul class="cards">
            {plans.data.filter((p) => p.self_serve).map((p) => (
              <li key={p.id} class="card">
                <h3>{p.name}</h3>
                <p>{p.price ? `${p.price.amount} ${p.price.currency.toUpperCase()} / ${p.price.interval}` : 'Negotiated'}</p>
                {p.trial && <p>{p.trial.days}-day trial</p>}
                <button type="button" disabled={!canManage} onClick={() => void checkout(p.id)}>
                  {p.trial ? `Start ${p.trial.days}-day trial of ${p.name}` : `Subscribe to ${p.name}`}
                </button>
              </li>
            ))}
          </ul>
        </div>
      )}
      {subscribed && canManage && <button type="button" onClick={() => void portal()}>Manage subscription</button>}
      {billing && (
        <table aria-label="Limits">
          <thead><tr><th>Limit</th><th>Used</th><th>Allowed</th></tr></thead>
          <tbody>{billing.limits.map((l) => <tr key={l.key}><td>{l.key}</td><td>{l.current}</td><td>{l.limit ?? 'negotiated'}</td></tr>)}</tbody>
        </table>
      )}
      <h2>Usage this period</h2>
      {summary ? (
        <table aria-label="Usage summary">
          <thead><tr><th>Meter</th><th>Quantity</th><th>Included</th><th>Billable</th><th>Amount ({summary.currency})</th></tr></thead>
          <tbody>
            {summary.lines.map((l) => <tr key={l.meter}><td>{l.meter}</td><td>{l.quantity} {l.unit}</td><td>{l.included}</td><td>{l.billable}</td><td>{l.amount}</td></tr>)}
            <tr><th scope="row" colSpan={4}>Total ({summary.status})</th><td>{summary.total}</td></tr>
          </tbody>
        </table>
      ) : (
        <p>No usage period yet.</p>
      )}
      <UsageChart />
    </section>
  );
}

/** The last 7 days of compute use per hour (uPlot). */
function UsageChart() {
  const host = useRef<HTMLDivElement>(null);
  const [empty, setEmpty] = useState(false);
  useEffect(() => {
    const el = host.current!;
    let plot: uPlot | null = null;
    let ro: ResizeObserver | null = null;
    let disposed = false;
    const end = new Date();
    end.setUTCMinutes(0, 0, 0);
    end.setUTCHours(end.getUTCHours() + 1);
    const start = new Date(end.getTime() - 7 * 86400_000);
    api<Series>('GET', `/v1/usage/series?start=${start.toISOString()}&end=${end.toISOString()}`).then((s) => {
      // The page may have been left while the series was on its way.
      if (disposed) return;
      if (s.data.length === 0) {
        setEmpty(true);
        return;
      }
      const times = [...new Set(s.data.flatMap((m) => m.buckets.map((b) => Date.parse(b.start) / 1000)))].sort((a, b) => a - b);
      const series = s.data.map((m) => {
        const by = new Map(m.buckets.map((b) => [Date.parse(b.start) / 1000, Number(b.quantity)]));
        return times.map((t) => by.get(t) ?? 0);
      });
      const width = () => Math.max(280, el.clientWidth);
      plot = new uPlot(
        {
          width: width(),
          height: 240,
          title: `Usage per ${s.bucket_width}`,
          series: [{}, ...s.data.map((m, i) => ({ label: m.meter, stroke: ['#2563eb', '#16a34a', '#d97706', '#9333ea'][i % 4] }))],
        },
        [times, ...series],
        el,
      );
      ro = new ResizeObserver(() => plot?.setSize({ width: width(), height: 240 }));
      ro.observe(el);
    }, () => !disposed && setEmpty(true));
    return () => {
      disposed = true;
      ro?.disconnect();
      plot?.destroy();
    };
  }, []);
  return (
    <figure class="chart">
      <figcaption>Usage, last 7 days</figcaption>
      {empty && <p>No usage recorded in the last 7 days.</p>}
      <div ref={host} role="img" aria-label="Usage chart" />
    </figure>
  );
}
