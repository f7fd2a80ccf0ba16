// Above every admin screen of a superadmin: the tenant the screens act in.
// The choice is sent as X-Weft-Tenant on every request from then on (the
// user screens too), and the open screen loads again.
import { html, useState } from './deps.js';
import { call, getActingTenant, setActingTenant } from './client.js';
import { useLoad } from './kit.js';

function TenantBar({ session }) {
  const tenants = useLoad(() => call('tenant.list', {}).then((r) => r.tenants.map((t) => t.name)), []);
  const [current, setCurrent] = useState(getActingTenant() || session.tenant);
  const names = [...new Set([...(tenants.data || []), current])];
  return html`<div class="tenant-bar row" data-testid="tenant-bar">
    <label for="acting-tenant">Acting in tenant</label>
    <select id="acting-tenant" value=${current} onChange=${(e) => {
      setCurrent(e.target.value);
      setActingTenant(e.target.value === session.tenant ? '' : e.target.value);
    }}>${names.map((n) => html`<option value=${n}>${n}</option>`)}</select>
    ${current !== session.tenant ? html`<span class="muted">every screen now shows tenant ${current}</span>` : null}
  </div>`;
}

export function withTenantBar(Screen) {
  return function AdminScreen(props) {
    if (props.session?.role !== 'superadmin') return html`<${Screen} ...${props} />`;
    return html`<div class="admin-with-tenant"><${TenantBar} session=${props.session} /><${Screen} ...${props} /></div>`;
  };
}
