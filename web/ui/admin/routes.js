// The admin screens, one module each in this folder. Each entry:
// {path: '/admin/providers', title: 'Providers', component, roles?}.
// `component` gets {session, params, query}; `roles` (default ['admin',
// 'superadmin']) says who sees the entry in the nav and may open the screen;
// `nav: false` keeps a route (an edit page) out of the nav.
import ProvidersScreen from './providers.js';
import HardwareTypesScreen from './hardwaretypes.js';
import ImageTypesScreen from './imagetypes.js';
import ServicesScreen from './services.js';
import TemplatesScreen from './templates.js';
import CatalogScreen from './catalog.js';
import TenantsScreen from './tenants.js';
import UsersScreen from './users.js';
import TokensScreen from './tokens.js';
import HostsScreen from './hosts.js';
import PluginsScreen from './plugins.js';
import ResourcesScreen from './resources.js';
import AuditScreen from './audit.js';

// The admin screens' own layout rules, beside the shell's style.css.
if (typeof document !== 'undefined' && !document.querySelector('link[data-admin-css]')) {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = new URL('./admin.css', import.meta.url).href;
  link.dataset.adminCss = '';
  document.head.appendChild(link);
}

export const adminRoutes = [
  { path: '/admin/templates', title: 'Cluster templates', component: TemplatesScreen, icon: '▥' },
  { path: '/admin/services', title: 'Services', component: ServicesScreen, icon: '⚙' },
  { path: '/admin/providers', title: 'Providers', component: ProvidersScreen, icon: '☁' },
  { path: '/admin/hardwaretypes', title: 'Hardware types', component: HardwareTypesScreen, icon: '▣' },
  { path: '/admin/imagetypes', title: 'Image types', component: ImageTypesScreen, icon: '◫' },
  { path: '/admin/catalog', title: 'Import and export', component: CatalogScreen, icon: '⇅' },
  { path: '/admin/resources', title: 'Resources', component: ResourcesScreen, icon: '▤' },
  { path: '/admin/plugins', title: 'Plugin types', component: PluginsScreen, icon: '◈' },
  { path: '/admin/hosts', title: 'Hosts', component: HostsScreen, icon: '▭' },
  { path: '/admin/users', title: 'Users', component: UsersScreen, icon: '☺' },
  { path: '/admin/tokens', title: 'API tokens', component: TokensScreen, icon: '⚷' },
  { path: '/admin/tenants', title: 'Tenants', component: TenantsScreen, icon: '▦', roles: ['superadmin'] },
  { path: '/admin/audit', title: 'Audit log', component: AuditScreen, icon: '☰' },
];
