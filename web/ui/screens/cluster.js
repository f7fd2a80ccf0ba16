import { html } from '../lib/html.js';
import { Page } from '../lib/components.js';

export function ClusterScreen() {
  return html`<${Page} title="cluster"><p>Coming in the next commit.</p><//>`;
}
