// Live updates from GET /api/v1/events (server-sent events). The browser's
// EventSource reconnects by itself and sends Last-Event-ID, so the gateway can
// replay what was missed; when it cannot (`reset`), the screen reloads its data.
// A screen reads its data before its stream opens, so whatever happened in
// between (a job that ended at once) came in no event: each time the stream
// opens, the screen reads its data again too.
import { useEffect, useRef } from './html.js';

const TYPES = ['task', 'job', 'cluster', 'task.progress', 'host'];

export function subscribe(filter, onEvent, onReset) {
  const params = new URLSearchParams();
  if (filter && filter.cluster) params.set('cluster', filter.cluster);
  const url = '/api/v1/events' + (params.toString() ? '?' + params : '');
  const source = new EventSource(url, { withCredentials: true });
  const handle = (type) => (e) => {
    let data = null;
    try { data = JSON.parse(e.data); } catch { return; }
    onEvent({ type, id: e.lastEventId, data });
  };
  for (const t of TYPES) source.addEventListener(t, handle(t));
  source.addEventListener('reset', () => onReset && onReset());
  source.addEventListener('open', () => onReset && onReset());
  return () => source.close();
}

// Calls handler(event) for every event while the component is shown. The
// handler may change between renders; the stream is opened once per filter.
export function useEvents(filter, handler, onReset) {
  const latest = useRef({ handler, onReset });
  latest.current = { handler, onReset };
  const key = filter === null ? null : JSON.stringify(filter || {});
  useEffect(() => {
    if (key === null) return undefined;
    return subscribe(JSON.parse(key), (e) => latest.current.handler(e),
      () => latest.current.onReset && latest.current.onReset());
  }, [key]);
}
