// The one place the admin screens import the shell from: preact, htm and the
// shell's API wrapper. If the shell moves a file, only this module changes.
export { h, render } from '../vendor/preact.module.js';
export { useState, useEffect, useRef, useMemo, useCallback } from '../vendor/hooks.module.js';
import { h } from '../vendor/preact.module.js';
import htm from '../vendor/htm.module.js';
export const html = htm.bind(h);
export { api } from '../lib/api.js';
