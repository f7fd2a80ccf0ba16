// How the admin screens talk to the gateway: the shell's api wrapper. The
// tenant a superadmin acts in is the shell's (its top-bar switcher sends
// X-Weft-Tenant and draws the screen again).
import { api } from './deps.js';

// Runs an op; resolves to the reply body, rejects with an ApiError carrying
// weftd's code and sentence.
export function call(op, body = {}) { return api.call(op, body); }

// One PUT of the file's bytes; onProgress(sent, total) as the browser sends them.
export function uploadResource(type, name, file, onProgress) {
  return api.uploadResource(type, name, file, onProgress);
}
