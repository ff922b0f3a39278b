"""Many nodes on one machine: 2 simulated nodes of 2 ranks each (processes started as torchrun
starts them: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT, on
gloo), each node with its own shard cache, read a pack from S3 (moto on loopback) through
fastprep.Loader, which splits each epoch by rank itself: every sample exactly once over the 4
ranks, and each shard downloaded once per node that reads it (the cache's locks), never once per
rank. A checkpoint the 4 ranks write mid-epoch then resumes at 3 ranks (2 on node 0, 1 on node 1)
on the same caches: the rest of the epoch exactly once, and no shard fetched again by a node that
holds it."""

import itertools
import os
import pickle
from collections import Counter

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fastprep
import fastprep.io as fio
from fastprep.io.remote import Retry

from helpers.s3_server import free_port, s3  # noqa: F401 (the session's server fixture)

# slow: two rounds of fresh rank processes (each imports torch, fastprep and s3fs: ~20 s on 2 cores)
pytestmark = [pytest.mark.one_backend, pytest.mark.slow]

ITEMS, BATCH, TAKEN = 48, 2, 2  # TAKEN batches a rank of the 4 reads of epoch 1 before the checkpoint
FAST = Retry(tries=4, backoff=0.01, max_backoff=0.05, timeout=30)


def _rank_main(rank: int, nodes: list[int], port: int, root: str, url: str, options: dict, phase: str) -> None:
    """One rank as torchrun starts it; `nodes[r]` is rank r's node. Writes what it read to root."""
    node = nodes[rank]
    local = [r for r in range(len(nodes)) if nodes[r] == node]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(len(nodes)), LOCAL_RANK=str(local.index(rank)),
                      LOCAL_WORLD_SIZE=str(len(local)), GROUP_RANK=str(node), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    try:
        # the node's cache: what every rank of a real node gets from cache_dir=/local-nvme/...
        ds = fio.PackedDataset(url, cache_dir=os.path.join(root, f"node{os.environ['GROUP_RANK']}"),
                               storage_options=options, retry=FAST)
        loader = fastprep.Loader(ds, BATCH, shuffle=True, seed=0, threads=1)  # rank and world: the group's
        out = {"rank": loader.rank, "world": loader.world_size, "node": node}
        if phase == "first":
            loader.set_epoch(0)
            out["epoch0"] = [int(y) for b in loader for y in b.data[1]]
            loader.set_epoch(1)
            out["taken"] = [int(y) for b in itertools.islice(loader, TAKEN) for y in b.data[1]]
            out["state"] = loader.state_dict()
        else:
            with open(os.path.join(root, "checkpoint.pkl"), "rb") as f:
                loader.load_state_dict(pickle.load(f))
            loader.set_epoch(1)  # the checkpoint's epoch: its position is kept
            out["rest"] = [int(y) for b in loader for y in b.data[1]]
        ds._source.wait()  # the rank's prefetches done: none cut short at exit (a second GET by its node)
        dist.barrier()
        with open(os.path.join(root, f"{phase}-{rank}.pkl"), "wb") as f:
            pickle.dump(out, f)
    finally:
        dist.destroy_process_group()


def _run(root, nodes, url, options, phase):
    mp.spawn(_rank_main, args=(nodes, free_port(), str(root), url, options, phase), nprocs=len(nodes))
    outs = []
    for rank in range(len(nodes)):
        with open(root / f"{phase}-{rank}.pkl", "rb") as f:
            outs.append(pickle.load(f))
    return outs


def _shard_gets(proxy, names):
    """Whole-shard downloads per shard name, from the proxy's request log."""
    gets = Counter()
    for line in proxy.log:
        method, path = line.split(" ")[:2]
        if method == "GET" and path.rsplit("/", 1)[-1] in names:
            gets[path.rsplit("/", 1)[-1]] += 1
    return gets


def _cached(root, node):
    return {p.name for p in (root / f"node{node}").glob("*/shard-*.fpk")}


def test_two_nodes_of_two_ranks_download_once_per_node_and_resume_at_three(tmp_path, s3):  # noqa: F811
    if s3.proxy is None:
        pytest.skip("counting downloads needs the loopback proxy (an http:// endpoint)")
    items = [(torch.full((3, 16, 16), i % 251, dtype=torch.uint8), i) for i in range(ITEMS)]
    url = s3.url("nodes")
    fio.pack(items, url, non_jpeg="raw", shard_bytes=1 << 12, storage_options=s3.options(),
             staging=tmp_path / "staging", progress=False)
    shard_of = fio.PackedDataset(url, cache_dir=tmp_path / "driver", storage_options=s3.options()).item_shards
    names = {f"shard-{k:05d}.fpk" for k in set(shard_of.tolist())}
    assert len(names) >= 8
    s3.proxy.clear()

    first = _run(tmp_path, [0, 0, 1, 1], url, s3.options(), "first")
    assert [(o["rank"], o["world"]) for o in first] == [(r, 4) for r in range(4)]  # split by the group
    assert sorted(y for o in first for y in o["epoch0"]) == list(range(ITEMS))  # every sample once
    # the point of a node cache: shards both ranks of a node read, downloaded once by it
    for node in (0, 1):
        a, b = ({int(shard_of[y]) for y in o["epoch0"]} for o in first if o["node"] == node)
        assert a & b, f"node {node}'s ranks share no shard: the test would show nothing"
    gets = _shard_gets(s3.proxy, names)
    held = [_cached(tmp_path, node) for node in (0, 1)]
    for name in names:  # one download per node holding the shard (not per rank: 4 ranks, at most 2)
        assert gets[name] == sum(name in h for h in held), (name, gets[name], held)
    assert held[0] and held[1]

    taken = [y for o in first for y in o["taken"]]
    state = first[0]["state"]
    assert state["consumed"] == 4 * TAKEN * BATCH == len(taken)
    with open(tmp_path / "checkpoint.pkl", "wb") as f:
        pickle.dump(state, f)
    second = _run(tmp_path, [0, 0, 1], url, s3.options(), "second")
    assert [(o["rank"], o["world"]) for o in second] == [(r, 3) for r in range(3)]
    every = taken + [y for o in second for y in o["rest"]]
    rest = ITEMS - len(taken)
    # the rest exactly once (the pad to a multiple of 3 repeats fewer than 3, as DistributedSampler)
    assert set(every) == set(range(ITEMS)) and len(every) - ITEMS == -rest % 3
    gets = _shard_gets(s3.proxy, names)
    held = [_cached(tmp_path, node) for node in (0, 1)]
    for name in names:  # still once per node: the restart fetched only shards its node lacked
        assert gets[name] == sum(name in h for h in held), (name, gets[name], held)
