// The one place the admin screens import the shell from: preact and htm (as
// lib/html.js binds them), the API wrapper and the shared components. If the
// shell moves a file, only this module changes.
export { html, h, Fragment, useState, useEffect, useMemo, useCallback, useRef } from '../lib/html.js';
export * as api from '../lib/api.js';
export {
  ErrorNote, Loading, StatusBadge, ProgressBar, Page, Card, ConfirmDialog, KeyValues, useAsync,
} from '../lib/components.js';
export { dateTime, parseDuration, plural, percent } from '../lib/format.js';
export { href, navigate } from '../lib/router.js';
