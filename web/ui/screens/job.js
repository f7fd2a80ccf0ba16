import { html } from '../lib/html.js';
import { Page } from '../lib/components.js';

export function JobScreen() {
  return html`<${Page} title="job"><p>Coming in the next commit.</p><//>`;
}
