// Starts the real processes the browser tests run against, each on loopback
// ephemeral ports in a temporary directory: weftd (CurveZMQ on, its own SQLite
// store), one weft-host with the fake plugins, and weft-web serving web/ui/.
// Users, tenants and the catalog are made with the real `weft` CLI as the
// superadmin, the way an operator would.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
export const SOURCE_DIR = process.env.WEFT_SOURCE_DIR || path.resolve(here, '..', '..', '..');
export const BUILD_DIR = process.env.WEFT_BUILD_DIR || path.join(SOURCE_DIR, 'build-asan');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function binary(name) {
  const p = path.join(BUILD_DIR, 'bin', name);
  if (!fs.existsSync(p)) throw new Error(`${p} is missing; build the ${name} target first`);
  return p;
}

function tail(file, bytes = 3000) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.length > bytes ? '...' + text.slice(-bytes) : text;
  } catch { return '(no log)'; }
}

function readJson(file) {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch { return null; }
}

// Polls until check() returns something truthy; throws with what() after timeout.
export async function waitFor(check, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    await sleep(50);
  }
}

class Child {
  constructor(name, file, args, dir) {
    this.name = name;
    this.log = path.join(dir, `${name}.log`);
    const out = fs.openSync(this.log, 'a');
    this.proc = spawn(file, args, { stdio: ['ignore', out, out], detached: true });
    fs.closeSync(out);
    this.exited = null;
    this.proc.on('exit', (code, signal) => { this.exited = { code, signal }; });
  }
  get pid() { return this.proc.pid; }
  running() { return this.exited === null; }
  async stop(graceMs = 10000) {
    if (!this.running()) return;
    // The process group: weft-host's workers go with their master.
    try { process.kill(-this.pid, 'SIGTERM'); } catch { /* gone */ }
    const deadline = Date.now() + graceMs;
    while (this.running() && Date.now() < deadline) await sleep(20);
    if (this.running()) {
      try { process.kill(-this.pid, 'SIGKILL'); } catch { /* gone */ }
      while (this.running()) await sleep(20);
    }
  }
  killNow() { try { process.kill(-this.pid, 'SIGKILL'); } catch { /* gone */ } }
}

const everyChild = new Set();
process.on('exit', () => { for (const c of everyChild) c.killNow(); });

export class Stack {
  constructor(name = 'web') {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `weft-${name}-`));
    this.children = [];
  }

  spawn(name, file, args) {
    const c = new Child(name, file, args, this.dir);
    this.children.push(c);
    everyChild.add(c);
    return c;
  }

  logs() {
    return this.children.map((c) => `--- ${c.name} (${c.log}) ---\n${tail(c.log)}`).join('\n');
  }

  async startWeftd() {
    const data = path.join(this.dir, 'data');
    fs.mkdirSync(data, { recursive: true });
    const toml = [
      '[server]', `data_dir = ${JSON.stringify(data)}`,
      '[endpoints]', 'api = "tcp://127.0.0.1:*"', 'provisioner = "tcp://127.0.0.1:*"', 'events = "tcp://127.0.0.1:*"',
      '[hosts]', 'heartbeat_ms = 200', 'silent_after_ms = 3000',
      '[jobs]', 'retry_backoff_ms = 50', 'max_attempts = 2',
      '[security]', 'curve = true', '',
    ].join('\n');
    const config = path.join(this.dir, 'weftd.toml');
    fs.writeFileSync(config, toml);
    await this.spawnWeftd();
    this.superadmin = path.join(data, 'credentials', 'superadmin.json');
    await waitFor(() => fs.existsSync(this.superadmin), 'the superadmin credential');
  }

  async spawnWeftd() {
    const config = path.join(this.dir, 'weftd.toml');
    this.weftd = this.spawn('weftd', binary('weftd'), ['--config', config]);
    const endpointsFile = path.join(this.dir, 'data', 'endpoints.json');
    this.endpoints = await waitFor(() => {
      if (!this.weftd.running()) throw new Error(`weftd exited during start-up:\n${tail(this.weftd.log)}`);
      const j = readJson(endpointsFile);
      return j && j.api && j.pid === this.weftd.pid ? j : null;
    }, () => `weftd to write ${endpointsFile}:\n${tail(this.weftd.log)}`);
  }

  // Stops weftd (SIGTERM), as an operator would for an upgrade.
  async stopWeftd() { await this.weftd.stop(); }

  // Starts weftd again on its data and the ports it had: the host and the
  // gateway find it where they left it.
  async restartWeftd() {
    const config = path.join(this.dir, 'weftd.toml');
    let toml = fs.readFileSync(config, 'utf8');
    for (const k of ['api', 'provisioner', 'events']) {
      toml = toml.replace(`${k} = "tcp://127.0.0.1:*"`, `${k} = ${JSON.stringify(this.endpoints[k])}`);
    }
    fs.writeFileSync(config, toml);
    await this.spawnWeftd();
  }

  // Runs the weft CLI; returns {code, out, err}. `as` is a credential file
  // (default: the superadmin's); `input` goes to its standard input.
  weft(args, { as, input, tenant } = {}) {
    const full = ['--server', this.endpoints.api, '--credentials', as || this.superadmin, '--timeout', '10000'];
    if (tenant) full.push('--tenant', tenant);
    const r = spawnSync(binary('weft'), [...full, ...args], { input: input ?? '', encoding: 'utf8', timeout: 60000 });
    return { code: r.status, out: r.stdout || '', err: r.stderr || '' };
  }

  weftOk(args, options) {
    const r = this.weft(args, options);
    if (r.code !== 0) throw new Error(`weft ${args.join(' ')} exited ${r.code}: ${r.err}${r.out}\n${tail(this.weftd.log, 1500)}`);
    return r.out;
  }

  weftJson(args, options) { return JSON.parse(this.weftOk(['-o', 'json', ...args], options)); }

  // A tenant with the example catalog imported (the fake templates among it).
  makeTenant(name) {
    if (name !== 'default') this.weftOk(['tenant', 'create', name]);
    this.weftOk(['catalog', 'import', this.catalogDir()], { tenant: name });
  }

  catalogDir() {
    if (!this.catalog) {
      this.catalog = path.join(this.dir, 'catalog');
      fs.cpSync(path.join(SOURCE_DIR, 'examples', 'catalog'), this.catalog, { recursive: true });
    }
    return this.catalog;
  }

  // Changes a fake service's action fields in the copied catalog (before
  // makeTenant), e.g. make START of fake-redis fail.
  patchService(service, action, fields) {
    const file = path.join(this.catalogDir(), 'services', `${service}.json`);
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    Object.assign(doc.provisioner.actions[action].fields, fields);
    fs.writeFileSync(file, JSON.stringify(doc, null, 2));
  }

  // A user of `tenant` who signs in with `password`.
  makeUser(tenant, name, role, password) {
    this.weftOk(['user', 'create', name, '--role', role], { tenant });
    this.weftOk(['user', 'passwd', name, '--password-stdin'], { tenant, input: password + '\n' });
  }

  // A credential file (a key pair weftd knows) for a user, for the weft CLI.
  credentialOf(tenant, user) {
    const file = path.join(this.dir, `${tenant}-${user}.json`);
    if (!fs.existsSync(file)) this.weftOk(['credentials', user, '-f', file], { tenant });
    return file;
  }

  async startHost(id = 'h1') {
    const token = this.weftOk(['host', 'token', 'create']).split('\n')[0].trim();
    const dir = path.join(this.dir, id);
    fs.mkdirSync(dir, { recursive: true });
    const plugins = ['providers', 'automators'].map((k) => path.join(BUILD_DIR, 'plugins', k));
    const toml = [
      `server = ${JSON.stringify(this.endpoints.provisioner)}`, `host_id = ${JSON.stringify(id)}`,
      `state_dir = ${JSON.stringify(path.join(dir, 'state'))}`, 'capacity = 16', 'take_wait_ms = 500',
      `plugin_dirs = [${plugins.map((p) => JSON.stringify(p)).join(', ')}]`,
      `enroll_token = ${JSON.stringify(token)}`, '',
    ].join('\n');
    const config = path.join(dir, 'host.toml');
    fs.writeFileSync(config, toml);
    this.host = this.spawn(`weft-host-${id}`, binary('weft-host'), ['--config', config]);
    await waitFor(() => {
      if (!this.host.running()) throw new Error(`weft-host exited:\n${tail(this.host.log)}`);
      const hosts = this.weftJson(['host', 'list']).hosts || [];
      return hosts.some((h) => h.id === id && h.live && (h.plugins || []).includes('fake-automator'));
    }, () => `host ${id} to register with the fake plugins:\n${tail(this.host.log)}`);
  }

  // extraToml: more tables; weftdToml: more keys of [weftd].
  async startGateway(extraToml = '', weftdToml = '') {
    const credentials = path.join(this.dir, 'gateway.json');
    this.weftOk(['gateway', 'credentials', 'web', '-f', credentials]);
    const addressFile = path.join(this.dir, 'weft-web.address.json');
    const toml = [
      '[server]', 'listen = "127.0.0.1:0"', `static_dir = ${JSON.stringify(path.join(SOURCE_DIR, 'web', 'ui'))}`,
      `address_file = ${JSON.stringify(addressFile)}`,
      '[weftd]', `api = ${JSON.stringify(this.endpoints.api)}`, `events = ${JSON.stringify(this.endpoints.events)}`,
      `credentials = ${JSON.stringify(credentials)}`, weftdToml,
      '[limits]', 'login_per_minute = 600', 'login_burst = 100',
      extraToml, '',
    ].join('\n');
    const config = path.join(this.dir, 'weft-web.toml');
    fs.writeFileSync(config, toml);
    this.gateway = this.spawn('weft-web', binary('weft-web'), ['--config', config]);
    const address = await waitFor(() => {
      if (!this.gateway.running()) throw new Error(`weft-web exited during start-up:\n${tail(this.gateway.log)}`);
      const j = readJson(addressFile);
      return j && j.url && j.pid === this.gateway.pid ? j : null;
    }, () => `weft-web to write ${addressFile}:\n${tail(this.gateway.log)}`);
    this.url = address.url.replace(/\/$/, '');
  }

  async stop() {
    for (const c of [...this.children].reverse()) {
      await c.stop();
      everyChild.delete(c);
    }
  }

  // Keeps the directory (and its logs) when the test failed.
  async cleanUp(failed) {
    await this.stop();
    if (!failed && !process.env.WEFT_KEEP_TEST_DIRS) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// The usual stack: weftd, one host and the gateway, tenants `acme` and
// `globex` with the example catalog, and in each an admin and a user.
// gateway: {toml, weftdToml}, more of weft-web.toml (see startGateway).
export async function startStack({ patch, gateway = {} } = {}) {
  const s = new Stack();
  try {
    await s.startWeftd();
    if (patch) patch(s);
    for (const t of ['acme', 'globex']) s.makeTenant(t);
    s.makeUser('acme', 'alice', 'user', 'alice-password-1');
    s.makeUser('acme', 'ada', 'admin', 'ada-password-1');
    s.makeUser('globex', 'bob', 'user', 'bob-password-1');
    await s.startHost();
    await s.startGateway(gateway.toml, gateway.weftdToml);
    return s;
  } catch (e) {
    const logs = s.logs();
    await s.stop();
    e.message += `\nlogs in ${s.dir}:\n${logs}`;
    throw e;
  }
}
