// node:test example: start respite as a test double and drive its clock.
// Run (from the repository root, after `cargo build`):
//   (cd examples/node && npm install)
//   RESPITE_BIN=target/debug/respite node --test examples/node/respite.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import { createClient } from 'redis';

let server;
let client;

before(async () => {
  const bin = process.env.RESPITE_BIN ?? 'target/debug/respite';
  server = spawn(bin, ['--port', '0', '--enable-test-commands'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  // respite prints the port it bound as the first line on stdout.
  const lines = createInterface({ input: server.stdout });
  const [line] = await once(lines, 'line');
  lines.close();
  client = createClient({ url: `redis://127.0.0.1:${Number(line)}` });
  await client.connect();
});

after(async () => {
  await client?.quit();
  server?.kill();
});

test('a key expires when the clock passes its TTL', async () => {
  // ADVANCE switches respite to a manual clock: from now on time moves only when told.
  await client.sendCommand(['RESPITE', 'CLOCK', 'ADVANCE', '0']);
  await client.set('session', 'abc', { PX: 5000 });
  await client.sendCommand(['RESPITE', 'CLOCK', 'ADVANCE', '4999']);
  assert.equal(await client.get('session'), 'abc');
  await client.sendCommand(['RESPITE', 'CLOCK', 'ADVANCE', '2']);
  assert.equal(await client.get('session'), null);
});

test('an injected failure reaches the client', async () => {
  await client.sendCommand(['RESPITE', 'FAULT', 'FAIL', '1', 'CMD', 'get', 'ERR', 'boom']);
  await assert.rejects(client.get('k'), /boom/);
  assert.equal(await client.get('k'), null);
});
