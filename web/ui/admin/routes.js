// The admin screens, registered by the admin modules in this folder. Each
// entry: {path: '/admin/providers', title: 'Providers', component, roles?}.
// `component` gets {session, params, query}; `roles` (default ['admin',
// 'superadmin']) says who sees the entry in the nav and may open the screen;
// `nav: false` keeps a route (an edit page) out of the nav.
export const adminRoutes = [];
