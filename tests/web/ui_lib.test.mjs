// The web UI's pure helpers, in node without a browser: durations as the CLI
// prints them, the config box's errors, plan grouping and the task graph layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { duration, parseDuration } from '../../web/ui/lib/format.js';
import { parseConfig, groupNodes } from '../../web/ui/lib/plan.js';
import { layoutDag } from '../../web/ui/lib/dag.js';
import { progressLabel } from '../../web/ui/lib/job.js';
import { leaseText } from '../../web/ui/lib/catalog.js';

test('durations read as the CLI prints them, and parse back', () => {
  assert.equal(duration(22), '22ms');
  assert.equal(duration(5200), '5.2s');
  assert.equal(duration(22000), '22s');
  assert.equal(duration(312000), '5m 12s');
  assert.equal(parseDuration('1d 12h'), 36 * 3600 * 1000);
  assert.equal(parseDuration('30m'), 30 * 60 * 1000);
  assert.equal(parseDuration('soon'), null);
});

test('the config box wants a JSON object and says where it is broken', () => {
  assert.deepEqual(parseConfig('{"a": 1}'), { value: { a: 1 } });
  assert.deepEqual(parseConfig('  '), { value: undefined });
  assert.match(parseConfig('[1]').error, /must be a JSON object/);
  assert.equal(parseConfig('{\n  "a": 1,\n  "b": }').error, 'The config is not valid JSON at line 3, column 8.');
  assert.equal(parseConfig('{"a": tru}').error, 'The config is not valid JSON at line 1, column 7.');
});

test('identical nodes are grouped as the CLI groups them', () => {
  const nodes = [
    { hostname: 'a-1', hardwaretype: 'small', imagetype: 'd', services: ['y', 'x'] },
    { hostname: 'a-2', hardwaretype: 'small', imagetype: 'd', services: ['x', 'y'] },
    { hostname: 'a-3', hardwaretype: 'medium', imagetype: 'd', services: ['x'] },
  ];
  const groups = groupNodes(nodes);
  assert.deepEqual(groups.map((g) => [g.count, g.hardwaretype, g.services.join(',')]), [[2, 'small', 'x,y'], [1, 'medium', 'x']]);
});

test('the task graph puts each task one column after its last predecessor', () => {
  const tasks = [
    { id: 1, after: [] }, { id: 2, after: [1] }, { id: 3, after: [1] }, { id: 4, after: [2, 3] }, { id: 5, after: [1, 4] },
  ];
  const { pos, edges } = layoutDag(tasks);
  const column = (id) => pos.get(String(id)).x;
  assert.ok(column(1) < column(2));
  assert.equal(column(2), column(3));
  assert.ok(column(3) < column(4) && column(4) < column(5));
  assert.notEqual(pos.get('2').y, pos.get('3').y, 'tasks of one column do not overlap');
  assert.equal(edges.length, 6);
});

test('a job\'s progress counts cancelled tasks, as `weft job show` does', () => {
  const label = progressLabel({ total: 24, succeeded: 18, failed: 4, cancelled: 2, stage: 4, stages: 4 });
  assert.equal(label, '18/24 tasks done · 4 failed · 2 cancelled · stage 4/4');
  assert.equal(progressLabel({ total: 3, succeeded: 3 }), '3/3 tasks done');
});

test('a template\'s lease of 0 reads as no lease', () => {
  assert.equal(leaseText({ initial: '0', max: '0', step: '0' }), 'no lease');
  assert.equal(leaseText({ initial: '1d', max: '7d', step: '12h' }), '1d, at most 7d');
  assert.equal(leaseText({ initial: '1d', max: '0' }), '1d');
});
