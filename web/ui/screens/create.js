import { html } from '../lib/html.js';
import { Page } from '../lib/components.js';

export function CreateClusterScreen() {
  return html`<${Page} title="create"><p>Coming in the next commit.</p><//>`;
}
