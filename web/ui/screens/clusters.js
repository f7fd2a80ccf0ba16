import { html } from '../lib/html.js';
import { Page } from '../lib/components.js';

export function ClustersScreen() {
  return html`<${Page} title="clusters"><p>Coming in the next commit.</p><//>`;
}
