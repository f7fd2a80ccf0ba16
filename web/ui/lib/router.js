// A small hash router: #/clusters/shop?tab=jobs. The hash keeps every screen a
// link that survives a reload without the gateway knowing the UI's routes.
import { useEffect, useState } from './html.js';

export function currentLocation() {
  const raw = decodeURI(window.location.hash.replace(/^#/, '')) || '/';
  const [path, search = ''] = raw.split('?');
  return { path: path || '/', query: Object.fromEntries(new URLSearchParams(search)) };
}

export function navigate(path) {
  const target = '#' + path;
  if (window.location.hash === target) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else window.location.hash = target;
}

export function href(path) { return '#' + path; }

export function useLocation() {
  const [loc, setLoc] = useState(currentLocation);
  useEffect(() => {
    const update = () => setLoc(currentLocation());
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return loc;
}

// Matches '/clusters/:cluster' against '/clusters/shop' -> {cluster: 'shop'}.
export function match(pattern, path) {
  const want = pattern.split('/').filter(Boolean);
  const got = path.split('/').filter(Boolean);
  if (want.length !== got.length) return null;
  const params = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(':')) params[want[i].slice(1)] = decodeURIComponent(got[i]);
    else if (want[i] !== got[i]) return null;
  }
  return params;
}

export function resolve(routes, path) {
  for (const route of routes) {
    const params = match(route.path, path);
    if (params) return { route, params };
  }
  return null;
}
