// The web UI's pure helpers, in node without a browser: durations as the CLI
// prints them, the config box's errors, plan grouping and the task graph layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { duration, parseDuration, nodesText } from '../../web/ui/lib/format.js';
import { parseConfig, groupNodes, planChanges, mergePatch } from '../../web/ui/lib/plan.js';
import { layoutDag } from '../../web/ui/lib/dag.js';
import { progressLabel } from '../../web/ui/lib/job.js';
import { leaseText } from '../../web/ui/lib/catalog.js';
import { withoutCliHints } from '../../web/ui/lib/components.js';

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

// Chromium draws a character no installed font has as an empty box; it finds
// fonts through fontconfig, as fc-list does.
test('every icon of the navigation has a glyph in an installed font', () => {
  const source = ['app.js', 'admin/routes.js']
    .map((f) => fs.readFileSync(new URL(`../../web/ui/${f}`, import.meta.url), 'utf8')).join('\n');
  const icons = [...source.matchAll(/icon: '([^']+)'/g)].map((m) => m[1]);
  assert.ok(icons.length >= 15, `the routes' icons: ${icons.join(' ')}`);
  for (const ch of new Set(icons.join(''))) {
    const code = ch.codePointAt(0);
    if (code < 0x80) continue;
    const fonts = spawnSync('fc-list', [`:charset=${code.toString(16)}`, 'family'], { encoding: 'utf8' });
    assert.equal(fonts.status, 0, `fc-list (fontconfig) runs: ${fonts.error || fonts.stderr}`);
    assert.notEqual(fonts.stdout.trim(), '', `some installed font draws ${ch} (U+${code.toString(16).toUpperCase()})`);
  }
});

test('a change\'s plan reads as what it changes: nodes deleted and added, and what happens to each service', () => {
  const plan = {
    tasks: [
      { node: 'n5', action: 'STOP', service: 'nginx' }, { node: 'n5', action: 'DELETE' },
      { node: 'n6', action: 'CREATE' }, { node: 'n6', action: 'INSTALL', service: 'nginx' },
      { node: 'n6', action: 'START', service: 'nginx' }, { node: 'n1', action: 'CONFIGURE', service: 'haproxy' },
      { node: 'n6', action: 'CONFIGURE', service: 'nginx' },
    ],
  };
  assert.deepEqual(planChanges(plan), {
    created: ['n6'],
    deleted: ['n5'],
    services: [
      { service: 'haproxy', actions: [{ action: 'CONFIGURE', done: 'configured', nodes: ['n1'] }] },
      { service: 'nginx', actions: [
        { action: 'INSTALL', done: 'installed', nodes: ['n6'] }, { action: 'CONFIGURE', done: 'configured', nodes: ['n6'] },
        { action: 'START', done: 'started', nodes: ['n6'] }, { action: 'STOP', done: 'stopped', nodes: ['n5'] }] },
    ],
  });
  assert.deepEqual(planChanges({}), { created: [], deleted: [], services: [] });
});

test('a reconfigure\'s config is merged into the cluster\'s as a JSON merge patch', () => {
  const before = { nginx: { port: '80', workers: 2 }, redis: { maxmemory: '1g' } };
  assert.deepEqual(mergePatch(before, { nginx: { port: '8080' }, redis: null }), { nginx: { port: '8080', workers: 2 } });
  assert.deepEqual(before.nginx.port, '80', 'the cluster\'s config is not changed');
  assert.deepEqual(mergePatch({}, { a: [1, 2] }), { a: [1, 2] });
});

test('weftd\'s sentences lose the hints that name CLI commands and protocol ops, and keep the rest', () => {
  assert.equal(withoutCliHints('cluster 3 already has job 13 running; wait for it (weft job watch 13) or abort it (weft job abort)'),
    'cluster 3 already has job 13 running; wait for it or abort it');
  assert.equal(withoutCliHints("cluster 'a' has job 7 running (scale); wait for it (job.get, `weft job watch 7`) or abort it "
    + '(job.abort, `weft job abort 7`)'), "cluster 'a' has job 7 running (scale); wait for it or abort it");
  const plain = 'nothing listens at its address (connection refused); start weftd (the service)';
  assert.equal(withoutCliHints(plain), plain);
});

test('a cluster\'s header counts the nodes it has, and while a job changes them the size it gets', () => {
  // A delete sets the size to 0 at its start, while its 3 nodes are still there.
  assert.equal(nodesText(3, 0, '5'), '3 nodes (0 once job #5 is done)');
  assert.equal(nodesText(1, 1, null), '1 node');
  assert.equal(nodesText(4, 5, null), '4 nodes');
  assert.equal(nodesText(5, 5, '6'), '5 nodes');
});
