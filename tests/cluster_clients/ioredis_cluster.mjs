// ioredis's Cluster against a respite that presents one cluster node owning every slot:
// a server started with --cluster-mode emulated, or a proxy (tests/cluster_clients.rs).
//
//   node ioredis_cluster.mjs HOST PORT {emulated|proxy}
//
// Runs a subset of the seed workloads (SCENARIOS.md S1, S3, S5, S6, S7) unchanged in
// cluster mode and prints "ok". Key names carry a per-run prefix.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Redis from "ioredis";

const [host, portArg, mode] = process.argv.slice(2);
const port = Number(portArg);
const p = `io-${randomBytes(4).toString("hex")}`;

const cluster = new Redis.Cluster([{ host, port }], {
  // Fail fast instead of retrying for ever if the topology is wrong.
  clusterRetryStrategy: () => null,
  redisOptions: { maxRetriesPerRequest: 1 },
});
cluster.defineCommand("acquire", {
  numberOfKeys: 2,
  lua: `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
          return redis.call('INCR', KEYS[2])
        end
        return false`,
});
cluster.defineCommand("release", {
  numberOfKeys: 1,
  lua: `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0`,
});

async function topology() {
  const nodes = cluster.nodes("master");
  assert.equal(nodes.length, 1, "one master");
  assert.equal(nodes[0].options.port, port, "at the port we gave");
  const slots = await cluster.cluster("SLOTS");
  assert.equal(slots.length, 1);
  assert.deepEqual(slots[0].slice(0, 2), [0, 16383]);
  const info = await cluster.cluster("INFO");
  assert.match(info, /cluster_state:ok/);
  assert.equal(await cluster.cluster("KEYSLOT", "foo"), 12182);
}

async function s1() {
  // Long TTLs where a check must see the key, short ones only where it must be gone (a
  // slow machine can only make those waits longer).
  await cluster.set(`${p}:session`, "v", "PX", 30000);
  assert.equal(await cluster.get(`${p}:session`), "v");
  const pttl = await cluster.pttl(`${p}:session`);
  assert.ok(pttl > 0 && pttl <= 30000, `pttl ${pttl}`);
  await cluster.set(`${p}:short`, "v", "PX", 50);
  await cluster.set(`${p}:plain`, "v");
  assert.equal(await cluster.ttl(`${p}:plain`), -1);
  assert.equal(await cluster.ttl(`${p}:missing`), -2);
  assert.equal(await cluster.pexpire(`${p}:plain`, 50), 1);
  await sleep(150);
  assert.equal(await cluster.get(`${p}:short`), null);
  assert.equal(await cluster.exists(`${p}:plain`), 0);
  await cluster.set(`${p}:token`, "t1");
  assert.equal(await cluster.getdel(`${p}:token`), "t1");
  assert.equal(await cluster.getdel(`${p}:token`), null);
  // Many slots in one pipeline: ioredis checks that they map to one node, and they do.
  const keys = Array.from({ length: 20 }, (_, i) => `${p}:k${i}`);
  const pipe = cluster.pipeline();
  keys.forEach((k, i) => pipe.set(k, String(i)));
  const set = await pipe.exec();
  assert.deepEqual(set, keys.map(() => [null, "OK"]));
  const reads = cluster.pipeline();
  keys.forEach((k) => reads.get(k));
  assert.deepEqual(await reads.exec(), keys.map((_, i) => [null, String(i)]));
}

async function s3() {
  const lock = `{${p}:lock}:holder`;
  const fence = `{${p}:lock}:fence`;
  assert.equal(await cluster.acquire(lock, fence, "a", 60000), 1);
  assert.equal(await cluster.acquire(lock, fence, "b", 60000), null);
  assert.equal(await cluster.release(lock, "b"), 0);
  assert.equal(await cluster.release(lock, "a"), 1);
  assert.equal(await cluster.acquire(lock, fence, "b", 60000), 2);
}

async function s5() {
  const s = `{${p}:q}:jobs`;
  assert.equal(await cluster.xgroup("CREATE", s, "workers", "0-0", "MKSTREAM"), "OK");
  await assert.rejects(cluster.xgroup("CREATE", s, "workers", "0-0"), /BUSYGROUP/);
  const ids = [];
  for (let i = 0; i < 2; i++) ids.push(await cluster.xadd(s, "MAXLEN", "~", 100, "*", "payload", String(i)));
  const got = await cluster.xreadgroup("GROUP", "workers", "c1", "COUNT", 10, "STREAMS", s, ">");
  assert.deepEqual(got[0][1].map((e) => e[0]), ids);
  assert.equal(await cluster.xreadgroup("GROUP", "workers", "c1", "COUNT", 10, "STREAMS", s, ">"), null);
  assert.equal((await cluster.xpending(s, "workers"))[0], 2);
  assert.equal(await cluster.xack(s, "workers", ...ids), 2);
  assert.equal((await cluster.xpending(s, "workers"))[0], 0);
}

async function s6() {
  const g = `{vehicle:${p}}`;
  const script = `
    if redis.call('EXISTS', KEYS[2]) == 1 then return 'busy' end
    redis.call('HSET', KEYS[2], 'output', ARGV[1])
    redis.call('SET', KEYS[3], ARGV[2])
    return 'prepared'`;
  const keys = [`${g}:checkpoint`, `${g}:prepared`, `${g}:committed-revision`];
  assert.equal(await cluster.eval(script, 3, ...keys, "out-1", "7"), "prepared");
  assert.equal(await cluster.eval(script, 3, ...keys, "out-2", "8"), "busy");
  // Load in one MULTI/EXEC: one slot, so ioredis sends it to the one node.
  const res = await cluster.multi().hgetall(keys[0]).get(keys[2]).hgetall(keys[1]).exec();
  assert.deepEqual(res, [[null, {}], [null, "7"], [null, { output: "out-1" }]]);
}

async function s7() {
  const c = `${p}:counter`;
  await Promise.all(Array.from({ length: 50 }, () => cluster.incr(c)));
  assert.equal(await cluster.incrby(c, -8), 42);
}

async function crossSlot() {
  // ioredis sends a multi-key command to its first key's slot; a cluster node refuses keys
  // of two slots. The proxy splits MSET by its own nodes instead, so only the server
  // answers CROSSSLOT here.
  if (mode === "emulated") {
    await assert.rejects(cluster.mset(`${p}:a`, "1", `${p}:b`, "2"), /CROSSSLOT/);
  }
  assert.equal(await cluster.mset(`{${p}}:a`, "1", `{${p}}:b`, "2"), "OK");
}

try {
  await new Promise((resolve, reject) => {
    cluster.once("ready", resolve);
    cluster.once("error", reject);
  });
  await topology();
  await s1();
  await s3();
  await s5();
  await s6();
  await s7();
  await crossSlot();
  console.log("ok");
} finally {
  cluster.disconnect();
}
