#!/usr/bin/env python3
"""Writes tests/fixtures/astral/plugin/ib-wire-corpus/ (run from there), the seeds of
fuzz_plugin_ib_wire: one byte of choices, then a QpMeta (376 bytes),
then a PlanMessage (92 bytes), laid out as plugin/src/ib/wire.hpp declares them (little-endian),
with the values two softhca hosts exchange in the plugin's ib tests (RoCE GID ::ffff:10.9.0.2,
IB LID 9 with LMC 2) and host names of the fabric the target generates (node0001..node0016)."""
import ipaddress
import struct

META_MAGIC, PLAN_MAGIC, VERSION = 0x51545341, 0x50545341, 3


def member(gid, lid, lmc, mtu, gid_index, rail, plane, rkey):
    return gid + struct.pack("<HBBBBhhHI", lid, lmc, 1, mtu, gid_index, rail, plane, 0, rkey)


def meta(qps, ethernet, lid, lmc, gid, rail, host, split=1, gid_index=3, mtu=5, members=1):
    qpn = [0x11 + q for q in range(qps)] + [0] * (16 - qps)
    head = struct.pack("<IHHQ16IBBB5x", META_MAGIC, VERSION, qps, 0x7f0000001000, *qpn, members,
                       ethernet, split) + host.encode().ljust(32, b"\0")
    ports = b"".join(member(gid, lid + m if lid else 0, lmc, mtu, gid_index, rail, m, 0x1234 + m)
                     for m in range(members))
    return head + ports + bytes(32 * (8 - members))


def plan(qps, sl, tc, policy, labels, paths):
    labels = labels + [0] * (16 - len(labels))
    paths = paths + [0] * (16 - len(paths))
    return struct.pack("<IHBBB3x16I16B", PLAN_MAGIC, qps, sl, tc, policy, *labels, *paths)


def choices(roce, fabric, policy):  # fabric: 0 none, 1 same-rail + hash model, 2 rail-only
    return bytes([int(roce) | fabric << 1 | policy << 3])


roce_gid = ipaddress.IPv6Address("::ffff:10.9.0.2").packed
seeds = {
    "roce-pinned-same-rail.bin": choices(True, 1, 1) +
        meta(4, 1, 0, 0, roce_gid, 2, "node0005") +
        plan(4, 0, 106, 1, [0xC001 + q for q in range(4)], []),
    "roce-spread-no-fabric.bin": choices(True, 0, 0) +
        meta(2, 1, 0, 0, roce_gid, 2, "beta", split=0) + plan(2, 0, 0, 0, [0x5A5A1, 0x5A5A2], []),
    "roce-rail-only-cross-rail.bin": choices(True, 2, 1) +
        meta(1, 1, 0, 0, roce_gid, 3, "node0009") + plan(1, 0, 0, 1, [0], []),
    "ib-pinned-lmc2.bin": choices(False, 1, 1) +
        meta(4, 0, 9, 2, bytes(16), 2, "node0002", gid_index=0) + plan(4, 3, 0, 1, [], [0, 1, 2, 3]),
    "roce-fused-both-ends.bin": bytes([choices(True, 1, 1)[0] | 0x20]) +
        meta(4, 1, 0, 0, roce_gid, 2, "node0005", members=2) +
        plan(4, 0, 106, 1, [0xC001 + q for q in range(4)], []),
    "ib-fused-peer.bin": choices(False, 1, 0) +
        meta(4, 0, 9, 2, bytes(16), 2, "node0002", gid_index=0, members=2) +
        plan(4, 0, 0, 0, [], [0, 1, 2, 3]),
    "ib-off.bin": choices(False, 0, 2) +
        meta(1, 0, 9, 0, bytes(16), 2, "node0003", split=0, gid_index=0) + plan(1, 0, 0, 2, [], []),
}
for name, data in seeds.items():
    assert len(data) == 1 + 376 + 92, name
    with open(name, "wb") as f:
        f.write(data)
