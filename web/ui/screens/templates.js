import { html } from '../lib/html.js';
import { Page } from '../lib/components.js';

export function TemplatesScreen() {
  return html`<${Page} title="templates"><p>Coming in the next commit.</p><//>`;
}
