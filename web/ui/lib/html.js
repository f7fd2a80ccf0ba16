// One place that binds htm to preact, so screens import `html` and the hooks
// from here and never from the vendor folder directly.
import { h, render, Fragment } from '../vendor/preact.js';
import htm from '../vendor/htm.js';

export const html = htm.bind(h);
export { h, render, Fragment };
export {
  useState, useEffect, useMemo, useCallback, useRef, useReducer,
} from '../vendor/hooks.js';
