// The app shell: who is signed in, the nav, and which screen the hash names.
import { html, render, useState, useEffect, useRef } from './lib/html.js';
import * as api from './lib/api.js';
import { useLocation, resolve, href, navigate } from './lib/router.js';
import { ErrorNote, Loading, retryable } from './lib/components.js';
import { useLivePaused } from './lib/events.js';
import { adminRoutes } from './admin/routes.js';
import { LoginScreen } from './screens/login.js';
import { HomeScreen } from './screens/home.js';
import { TemplatesScreen } from './screens/templates.js';
import { CreateClusterScreen } from './screens/create.js';
import { ClustersScreen } from './screens/clusters.js';
import { ClusterScreen } from './screens/cluster.js';
import { JobScreen } from './screens/job.js';
import { AccountScreen } from './screens/account.js';

const ADMIN_ROLES = ['admin', 'superadmin'];

const userRoutes = [
  { path: '/', title: 'Overview', component: HomeScreen, icon: '◧' },
  { path: '/clusters', title: 'Clusters', component: ClustersScreen, icon: '▦' },
  { path: '/templates', title: 'Templates', component: TemplatesScreen, icon: '▤' },
  { path: '/create', title: 'New cluster', component: CreateClusterScreen, icon: '+' },
  { path: '/clusters/:cluster', title: 'Cluster', component: ClusterScreen, nav: false },
  { path: '/jobs/:job', title: 'Job', component: JobScreen, nav: false },
  { path: '/account', title: 'Your account', component: AccountScreen, nav: false },
];

function mayOpen(route, session) {
  const roles = route.roles || ADMIN_ROLES;
  return roles.includes(session.role);
}

function NavLink({ route, current }) {
  const active = route.path === '/' ? current === '/' : current === route.path || current.startsWith(route.path + '/');
  return html`<a class=${'nav-link' + (active ? ' active' : '')} href=${href(route.path)}
    aria-current=${active ? 'page' : undefined}>
    <span class="nav-icon" aria-hidden="true">${route.icon || '•'}</span>${route.title}</a>`;
}

function Nav({ session, path, onLogout, open, onToggle }) {
  const admin = adminRoutes.filter((r) => r.nav !== false && mayOpen(r, session));
  return html`<nav class=${'nav' + (open ? ' open' : '')} aria-label="Main">
    <div class="nav-section">
      ${userRoutes.filter((r) => r.nav !== false).map((r) => html`<${NavLink} route=${r} current=${path} />`)}
    </div>
    ${admin.length ? html`<div class="nav-section" data-testid="admin-nav">
      <div class="nav-heading">Administration</div>
      ${admin.map((r) => html`<${NavLink} route=${r} current=${path} />`)}
    </div>` : null}
    <div class="nav-foot">
      <div class="whoami" data-testid="whoami">
        <a class="whoami-name" href=${href('/account')} title="Your account: password and API tokens">${session.user}</a>
        <div class="whoami-meta">${session.role} · ${session.tenant}</div>
      </div>
      <button class="button small" data-testid="logout" onClick=${onLogout}>Sign out</button>
    </div>
  </nav>`;
}

function Forbidden() {
  return html`<section class="page"><div class="notice" data-testid="forbidden">
    <h1>Not for your role</h1>
    <p>This screen is for tenant administrators. <a href="#/">Back to the overview</a>.</p>
  </div></section>`;
}

function NotFound({ path }) {
  return html`<section class="page"><div class="notice"><h1>Nothing at ${path}</h1>
    <p><a href="#/">Back to the overview</a>.</p></div></section>`;
}

// A superadmin acts in any tenant: the choice goes with every request as
// X-Weft-Tenant, and the screen is drawn again for the new tenant.
function TenantSwitcher({ session, tenant, onChange }) {
  const [tenants, setTenants] = useState(null);
  useEffect(() => {
    api.call('tenant.list', {}).then((r) => setTenants(r.tenants.map((t) => t.name)), () => setTenants(null));
  }, []);
  if (!tenants) return html`<span class="topbar-tenant" title="tenant">${tenant}</span>`;
  return html`<select class="topbar-tenant-select" aria-label="Tenant" value=${tenant} data-testid="tenant-switcher"
      onChange=${(e) => onChange(e.target.value)}>
    ${tenants.map((t) => html`<option value=${t}>${t}${t === session.tenant ? ' (yours)' : ''}</option>`)}
  </select>`;
}

// While an event stream is down (weftd or weft-web cannot be reached), the
// screen does not change by itself: say so until the stream is back (then the
// screen reads its data again).
function LivePaused() {
  if (!useLivePaused()) return null;
  return html`<div class="live-paused" role="status" data-testid="live-paused">
    <strong>Live updates are paused:</strong> the server cannot be reached. Reconnecting by itself; until then
    this page may be out of date.</div>`;
}

function Shell({ session, onLogout, onPasswordChanged }) {
  const loc = useLocation();
  const [navOpen, setNavOpen] = useState(false);
  // The tenant requests act in when they name none, as weftd says: the
  // superadmin's own (_system) has no clusters, its requests act in another.
  const home = session.acting_tenant || session.tenant;
  const [tenant, setTenant] = useState(() => api.tenantOverrideValue() || home);
  const switchTenant = (t) => {
    api.setTenantOverride(t === home ? null : t);
    setTenant(t);
  };
  useEffect(() => setNavOpen(false), [loc.path]);
  const found = resolve([...userRoutes, ...adminRoutes], loc.path);
  let screen;
  if (!found) screen = html`<${NotFound} path=${loc.path} />`;
  else if (adminRoutes.includes(found.route) && !mayOpen(found.route, session)) screen = html`<${Forbidden} />`;
  else {
    const Screen = found.route.component;
    const acting = tenant === session.tenant ? session : { ...session, tenant };
    screen = html`<${Screen} key=${loc.path + '@' + tenant} session=${acting} params=${found.params} query=${loc.query}
      onPasswordChanged=${onPasswordChanged} />`;
  }
  useEffect(() => {
    document.title = found ? `${found.route.title} · Weft` : 'Weft';
  }, [found && found.route]);
  return html`<div class="shell">
    <header class="topbar">
      <button class="icon-button nav-toggle" aria-label="Menu" onClick=${() => setNavOpen(!navOpen)}>☰</button>
      <a class="brand" href="#/"><img src="favicon.svg" alt="" width="22" height="22" />Weft</a>
      ${session.role === 'superadmin' ? html`<${TenantSwitcher} session=${session} tenant=${tenant} onChange=${switchTenant} />`
        : html`<span class="topbar-tenant" title="tenant">${session.tenant}</span>`}
    </header>
    <${Nav} session=${session} path=${loc.path} onLogout=${onLogout} open=${navOpen} />
    <main class="main"><${LivePaused} />${screen}</main>
  </div>`;
}

function App() {
  const [session, setSession] = useState(undefined); // undefined: asking the gateway
  const [bootError, setBootError] = useState(null);
  const [notice, setNotice] = useState(null);

  // While weftd (or weft-web) cannot be reached the session is asked for again,
  // waiting longer each time, until an answer comes or the user signs in.
  const boot = useRef({ asking: true, timer: null, delay: 2000 });
  useEffect(() => {
    const b = boot.current;
    const ask = () => api.currentSession().then(
      (s) => { if (b.asking) { b.asking = false; setBootError(null); setSession(s); } },
      (e) => {
        if (!b.asking) return;
        setBootError(e);
        setSession(null);
        if (retryable(e)) {
          b.timer = setTimeout(ask, b.delay);
          b.delay = Math.min(b.delay * 2, 30000);
        } else {
          b.asking = false;
        }
      });
    ask();
    const unsubscribe = api.onUnauthorized(() => {
      setNotice('Your session has ended; sign in again.');
      setSession(null);
    });
    return () => { b.asking = false; clearTimeout(b.timer); unsubscribe(); };
  }, []);

  const logout = async () => {
    try { await api.logout(); } catch { /* signed out locally either way */ }
    setNotice('You are signed out.');
    setSession(null);
    navigate('/');
  };

  if (session === undefined) return html`<div class="boot"><${Loading} what="Connecting" /></div>`;
  if (!session) {
    return html`<${LoginScreen} notice=${notice} bootError=${bootError}
      onLogin=${(s) => { boot.current.asking = false; clearTimeout(boot.current.timer); setNotice(null); setBootError(null); setSession(s); }} />`;
  }
  const passwordChanged = () => {
    api.setCsrfToken(null);
    setNotice('Your password is changed; sign in with the new one.');
    setSession(null);
    navigate('/');
  };
  return html`<${Shell} session=${session} onLogout=${logout} onPasswordChanged=${passwordChanged} />`;
}

const root = document.getElementById('app');
root.textContent = ''; // the 'Loading' placeholder of index.html
render(html`<${App} />`, root);
