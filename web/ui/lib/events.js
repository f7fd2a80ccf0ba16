// Live updates from GET /api/v1/events (server-sent events). The browser's
// EventSource reconnects by itself and sends Last-Event-ID, so the gateway can
// replay what was missed; when it cannot (`reset`), the screen reloads its data.
// A screen reads its data before its stream opens, so whatever happened in
// between (a job that ended at once) came in no event: each time the stream
// opens, the screen reads its data again too.
//
// A browser gives up on an EventSource whose reconnection got an error answer
// (a 503 while weftd cannot be reached): then this opens a new one, waiting
// longer after each failure. While a stream is down the shell says that live
// updates are paused (useLivePaused).
//
// A stream can stay open while weftd is down (weft-web is up): weft-web then
// sends `weftd` events, {reachable:false} when weftd cannot be reached and
// {reachable:true} once it is back. Live updates are paused meanwhile too, and
// each screen reads its data again when weftd is back.
import { useEffect, useRef, useState } from './html.js';

const TYPES = ['task', 'job', 'cluster', 'task.progress', 'host'];
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30000;

const downStreams = new Set();
const pausedListeners = new Set();
// Streams that weft-web told that weftd cannot be reached (and not yet that it is back).
const weftdAway = new Set();

function paused() { return downStreams.size > 0 || weftdAway.size > 0; }

function mark(set, stream, down) {
  const before = paused();
  if (down) set.add(stream); else set.delete(stream);
  const after = paused();
  if (before !== after) pausedListeners.forEach((l) => l(after));
}
const markDown = (stream, down) => mark(downStreams, stream, down);

// Whether any open stream is down now, or says that weftd is (live updates are paused).
export function useLivePaused() {
  const [now, setNow] = useState(paused());
  useEffect(() => {
    pausedListeners.add(setNow);
    setNow(paused());
    return () => pausedListeners.delete(setNow);
  }, []);
  return now;
}

export function subscribe(filter, onEvent, onReset) {
  const params = new URLSearchParams();
  if (filter && filter.cluster) params.set('cluster', filter.cluster);
  const url = '/api/v1/events' + (params.toString() ? '?' + params : '');
  const stream = {};
  let source = null;
  let timer = null;
  let delay = RETRY_FIRST_MS;
  const handle = (type) => (e) => {
    let data = null;
    try { data = JSON.parse(e.data); } catch { return; }
    onEvent({ type, id: e.lastEventId, data });
  };
  const open = () => {
    timer = null;
    const s = new EventSource(url, { withCredentials: true });
    source = s;
    for (const t of TYPES) s.addEventListener(t, handle(t));
    s.addEventListener('reset', () => onReset && onReset());
    s.addEventListener('weftd', (e) => {
      let data = null;
      try { data = JSON.parse(e.data); } catch { return; }
      const back = data.reachable === true;
      const wasAway = weftdAway.has(stream);
      mark(weftdAway, stream, !back);
      // What changed while weftd was away came in no event.
      if (back && wasAway && onReset) onReset();
    });
    s.addEventListener('open', () => {
      delay = RETRY_FIRST_MS;
      markDown(stream, false);
      // A stream opens only while weftd answers (weft-web asks it who the viewer is).
      mark(weftdAway, stream, false);
      if (onReset) onReset();
    });
    s.addEventListener('error', () => {
      if (source !== s) return;
      markDown(stream, true);
      if (s.readyState !== EventSource.CLOSED) return; // the browser tries again by itself
      s.close();
      timer = setTimeout(open, delay);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    });
  };
  open();
  return () => {
    clearTimeout(timer);
    if (source) source.close();
    source = null;
    markDown(stream, false);
    mark(weftdAway, stream, false);
  };
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
