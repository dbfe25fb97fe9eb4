"""redis-py's RedisCluster against a respite that presents one cluster node owning every
slot: a server started with --cluster-mode emulated, or a proxy (tests/cluster_clients.rs).

    python redis_py_cluster.py HOST PORT {emulated|proxy}

Runs a subset of the seed workloads (SCENARIOS.md S1, S3, S5, S6, S7) unchanged in
cluster mode, over RESP2 and RESP3, and prints "ok". Key names carry a per-run prefix so
runs against one server do not see each other's keys.
"""

import sys
import time
import uuid

from redis.cluster import RedisCluster
from redis.exceptions import ClusterCrossSlotError, RedisClusterException, ResponseError

HOST, PORT, MODE = sys.argv[1], int(sys.argv[2]), sys.argv[3]

# S3: acquire = SET NX PX plus a fencing counter in the same {tag}; release = compare-and-DEL.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# S6: prepare writes the prepared record unless one exists, over one {vehicle:N} group.
PREPARE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 'busy' end
local rev = redis.call('GET', KEYS[3]) or ''
if rev ~= ARGV[1] then return {'conflict', rev} end
redis.call('HSET', KEYS[2], 'output', ARGV[2], 'base', ARGV[1], 'blob', ARGV[3])
return 'prepared'
"""


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def topology(rc):
    nodes = rc.get_nodes()
    check(len(nodes) == 1, f"one node, got {nodes}")
    check(nodes[0].port == PORT, f"the node is at port {PORT}: {nodes[0]}")
    slots = rc.cluster_slots()
    check(list(slots.keys()) == [(0, 16383)], f"one range over every slot: {slots}")
    info = rc.cluster_info()
    check(info["cluster_state"] == "ok", f"cluster_state ok: {info}")
    check(int(info["cluster_slots_assigned"]) == 16384, "every slot assigned")
    for key in ["foo", "{user1000}.following", "a{b}c", "x" * 100]:
        check(rc.cluster_keyslot(key) == rc.keyslot(key), f"server and client slot of {key}")


def s1_expiring_state(rc, p):
    # Long TTLs where a check must see the key, short ones only where it must be gone
    # (a slow machine can only make those waits longer).
    rc.set(f"{p}:session", "v", px=30000)
    check(rc.get(f"{p}:session") == b"v", "fresh value")
    check(0 < rc.pttl(f"{p}:session") <= 30000, "pttl within the ttl")
    rc.set(f"{p}:short", "v", px=50)
    rc.set(f"{p}:plain", "v")
    check(rc.ttl(f"{p}:plain") == -1 and rc.ttl(f"{p}:missing") == -2, "ttl -1 / -2")
    check(rc.pexpire(f"{p}:plain", 50), "pexpire on a key")
    time.sleep(0.15)
    check(rc.get(f"{p}:short") is None and rc.exists(f"{p}:plain") == 0, "expired")
    rc.set(f"{p}:token", "t1")
    check(rc.getdel(f"{p}:token") == b"t1", "token once")
    check(rc.getdel(f"{p}:token") is None, "then nil")
    # Keys in many slots: the client splits by slot, every piece to the one node.
    keys = [f"{p}:k{i}" for i in range(20)]
    rc.mset_nonatomic({k: i for i, k in enumerate(keys) if i % 2 == 0})
    got = rc.mget_nonatomic(keys)
    check(got == [str(i).encode() if i % 2 == 0 else None for i in range(20)], f"mget {got}")
    check(rc.delete(*keys) == 10, "delete counts across slots")


def s3_lock(rc, p):
    lock, fence = f"{{{p}:lock}}:holder", f"{{{p}:lock}}:fence"
    acquire, release = rc.register_script(ACQUIRE), rc.register_script(RELEASE)
    t1 = acquire(keys=[lock, fence], args=["a", 60000])
    check(t1 == 1, f"first fencing token {t1}")
    check(acquire(keys=[lock, fence], args=["b", 60000]) is None, "held")
    check(release(keys=[lock], args=["b"]) == 0, "not the holder")
    check(release(keys=[lock], args=["a"]) == 1, "released")
    t2 = acquire(keys=[lock, fence], args=["b", 60000])
    check(t2 == 2, f"fencing token grows: {t2}")


def entries(reply):
    """XREADGROUP's entries of its one stream: RESP2 gives [[name, entries]], RESP3
    {name: [entries]}; nothing new is [] or {}."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return next(iter(reply.values()))[0]
    return reply[0][1]


def s5_stream(rc, p):
    s = f"{{{p}:q}}:jobs"
    rc.xgroup_create(s, "workers", id="0-0", mkstream=True)
    try:
        rc.xgroup_create(s, "workers", id="0-0")
        check(False, "BUSYGROUP expected")
    except ResponseError as e:
        check(str(e).startswith("BUSYGROUP"), str(e))
    ids = [rc.xadd(s, {"payload": str(i)}, maxlen=100, approximate=True) for i in range(2)]
    got = entries(rc.xreadgroup("workers", "c1", {s: ">"}, count=10))
    check([e[0] for e in got] == ids, f"delivered once, in order: {got}")
    again = entries(rc.xreadgroup("workers", "c1", {s: ">"}, count=10))
    check(again == [], f"nothing new: {again}")
    check(rc.xpending(s, "workers")["pending"] == 2, "two pending")
    check(rc.xack(s, "workers", *ids) == 2, "acked")
    check(rc.xpending(s, "workers")["pending"] == 0, "none pending")


def s6_tagged_group(rc, p):
    g = f"{{vehicle:{p}}}"
    keys = [f"{g}:checkpoint", f"{g}:prepared", f"{g}:committed-revision"]
    prepare = rc.register_script(PREPARE)
    blob = bytes([0, 255, 128, 10, 13])
    check(prepare(keys=keys, args=["", "out-1", blob]) == b"prepared", "prepared")
    check(prepare(keys=keys, args=["", "out-2", blob]) == b"busy", "busy")
    check(rc.hget(keys[1], "blob") == blob, "binary field verbatim")
    # Load in one transaction: every key in the group's slot.
    pipe = rc.pipeline(transaction=True)
    pipe.hgetall(keys[0]).get(keys[2]).hgetall(keys[1])
    checkpoint, rev, prepared = pipe.execute()
    # redis-py's cluster transactions return HGETALL's reply unconverted (a flat list).
    as_dict = lambda r: r if isinstance(r, dict) else dict(zip(r[::2], r[1::2]))
    checkpoint, prepared = as_dict(checkpoint), as_dict(prepared)
    check(checkpoint == {} and rev is None and prepared[b"output"] == b"out-1", f"load {checkpoint} {rev} {prepared}")


def s7_counters(rc, p):
    c = f"{p}:counter"
    for _ in range(50):
        rc.incr(c)
    check(rc.incrby(c, -8) == 42, "signed deltas")


def cross_slot(rc, p):
    # The client's own check: keys of two slots in one multi-key command.
    try:
        rc.mset({f"{p}:a": 1, f"{p}:b": 2})
        check(False, "cross-slot MSET refused by the client")
    except RedisClusterException:
        pass
    if MODE == "emulated":
        # Sent as is to the node, the server refuses it as a cluster node does.
        try:
            node = rc.get_default_node().redis_connection
            node.execute_command("MSET", f"{p}:a", 1, f"{p}:b", 2)
            check(False, "CROSSSLOT expected")
        except ClusterCrossSlotError:
            pass  # redis-py's class for a -CROSSSLOT reply


def main():
    for protocol in (2, 3):
        rc = RedisCluster(host=HOST, port=PORT, protocol=protocol, socket_timeout=10)
        p = f"rp{protocol}-{uuid.uuid4().hex[:8]}"
        topology(rc)
        s1_expiring_state(rc, p)
        s3_lock(rc, p)
        s5_stream(rc, p)
        s6_tagged_group(rc, p)
        s7_counters(rc, p)
        cross_slot(rc, p)
        rc.close()
    print("ok")


main()
