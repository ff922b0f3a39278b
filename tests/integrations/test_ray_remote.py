"""fastprep.ray.read_packed over a pack in S3 (moto on loopback) on a Ray cluster of 2 nodes started
on this machine (ray.cluster_utils.Cluster), each node with its own shard cache (a cache_dir
template with {node}): two epochs into iter_torch_batches give every sample exactly once each, the
samples the in-process pipeline gives, and each node downloads each shard it reads at most once
(counted at the proxy in front of the server: a shard's GETs are the nodes caching it); the first
epoch downloads each shard once in all (dealt to one node), the second again where it went."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.io.remote import Retry

from helpers.s3_server import s3  # noqa: F401 (the session's server fixture)

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'fastprep[ray]')")
fray = pytest.importorskip("fastprep.ray")
from ray.cluster_utils import Cluster  # noqa: E402 (needs ray)

from fastprep.integrations._ray_remote import ShardDealer, node_cache_dir  # noqa: E402

# slow: starts a 2-node Ray cluster (~30 s on 2 cores); .ci/slow runs it. serial: alone, not beside
# another xdist worker: cluster_utils writes its address where a plain ray.init() (test_ray.py's)
# looks for a cluster to join, and would join this one.
pytestmark = [pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning:ray"), pytest.mark.one_backend,
              pytest.mark.slow, pytest.mark.serial]

ITEMS, SEED = 60, 3
FAST = Retry(tries=4, backoff=0.01, max_backoff=0.05, timeout=30)


def _items():
    return [(torch.randint(0, 256, (3, 20, 20), generator=torch.Generator().manual_seed(i), dtype=torch.uint8),
             i % 7) for i in range(ITEMS)]


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                      "object_store_memory": 96 * 2**20})
    c.add_node(num_cpus=1, object_store_memory=96 * 2**20)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False,
             runtime_env={"env_vars": {"FASTPREP_BACKEND": fastprep.backend()}})
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield c
    ray.shutdown()
    c.shutdown()


def _shard_gets(proxy, names):
    gets = dict.fromkeys(names, 0)
    for line in proxy.log:
        method, path = line.split(" ")[:2]
        name = path.rsplit("/", 1)[-1]
        if method == "GET" and name in gets:
            gets[name] += 1
    return gets


def test_two_nodes_read_an_s3_pack_each_shard_once_a_node(cluster, s3, tmp_path):  # noqa: F811
    if s3.proxy is None:
        pytest.skip("counting downloads needs the loopback proxy (an http:// endpoint)")
    url = s3.url("ray")
    fio.pack(_items(), url, non_jpeg="raw", shard_bytes=1 << 12, storage_options=s3.options(),
             staging=tmp_path / "staging", progress=False)
    local = fio.PackedDataset(tmp_path / "staging")
    names = {f"shard-{k:05d}.fpk" for k in set(local.item_shards.tolist())}
    assert len(names) >= 8
    template = str(tmp_path / "cache-{node}")
    opts = {"storage_options": s3.options(), "cache_dir": template}
    tf = T.RandomCrop(12)
    s3.proxy.clear()
    ds = fray.read_packed(url, **opts)
    ds = ds.map_batches(fray.CompactMap(tf, seed=SEED, load=fray.PackedImages(url, retry=FAST, **opts)),
                        batch_format="numpy")
    want = list(DataLoader(T.SeedByIndex(fio.PackedDataset(tmp_path / "staging", transform=tf), seed=SEED),
                           batch_size=ITEMS, collate_fn=fastprep.compact_collate))[0].data
    for epoch in range(2):
        got = {}
        for batch in ds.iter_torch_batches(batch_size=16, collate_fn=fray.CompactCollateFn()):
            for j, i in enumerate(batch.data["id"].tolist()):
                assert i not in got, f"epoch {epoch}: sample {i} twice"
                got[i] = (batch.data["image"][j], int(batch.data["label"][j]))
        assert sorted(got) == list(range(ITEMS)), epoch
        for i in range(ITEMS):
            assert torch.equal(got[i][0], want[0][i]) and got[i][1] == int(want[1][i]), (epoch, i)
        gets = _shard_gets(s3.proxy, names)
        nodes = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
        held = {n: {p.name for p in tmp_path.glob(f"cache-{n}/*/shard-*.fpk")} for n in nodes}
        for name in names:  # each node downloaded a shard at most once: its GETs are the nodes holding it
            assert gets[name] == sum(name in h for h in held.values()), (epoch, name, gets[name])
        if epoch == 0:  # dealt once, read where dealt: one download per shard in all, both nodes busy
            assert sum(gets.values()) == len(names) and all(held.values()), (gets, held)


def test_the_dealer_gives_each_shard_once_a_pass_and_sends_it_back_where_it_went():
    rows = [np.array([2 * k, 2 * k + 1]) for k in range(4)]
    dealer = ShardDealer(rows, [r % 3 for r in rows])
    first = [dealer.take("a", slot, "AB"[slot % 2])[0] for slot in range(4)]
    assert sorted(first) == [0, 1, 2, 3]
    assert dealer.take("a", 2, "B")[0] == first[2]  # a retried task: its slot's shard again
    with pytest.raises(RuntimeError, match="every shard of this pass is dealt"):
        dealer.take("a", 9, "A")
    # the next pass, tasks in another order: each node gets back the shards it took first
    second = {slot: dealer.take("b", slot, node)[0] for slot, node in ((5, "B"), (1, "A"), (7, "B"), (0, "A"))}
    assert {second[1], second[0]} == {first[0], first[2]} and {second[5], second[7]} == {first[1], first[3]}
    # a node with none of its own left takes another's shard (a second copy, no wait)
    third = [dealer.take("c", slot, "A")[0] for slot in range(4)]
    assert sorted(third) == [0, 1, 2, 3] and dealer.placement()[first[1]] == ["A", "B"]


def test_cache_dir_templates_and_bad_arguments(tmp_path):
    assert node_cache_dir(None) is None and node_cache_dir("/x/plain") == "/x/plain"
    assert "{node}" not in node_cache_dir("/x/{node}/c") and node_cache_dir("/x/{node}/c").startswith("/x/")
    with pytest.raises(TypeError, match="cache_dir"):
        fray.read_packed("s3://b/p", cache_dir=3)
    with pytest.raises(TypeError, match="cache_dir"):
        fray.PackedImages("s3://b/p", cache_dir=["a"])
    fio.pack([(torch.zeros(3, 4, 4, dtype=torch.uint8), 0)], tmp_path / "p", non_jpeg="raw", progress=False)
    with pytest.raises(ValueError, match="for a pack at a URL"):
        fray.read_packed(tmp_path / "p", cache_dir="/tmp/x")


def test_a_process_opens_a_remote_pack_once_for_every_task(tmp_path):
    """Each task gets its own copy of PackedImages (unpickled): copies of one URL and options share
    the process's PackedDataset (opening one checks its index against the store: round trips)."""
    import pickle

    fio.pack([(torch.full((3, 4, 4), i, dtype=torch.uint8), i) for i in range(3)], tmp_path / "p", non_jpeg="raw",
             progress=False)
    load = fray.PackedImages(f"file://{tmp_path / 'p'}", cache_dir=str(tmp_path / "c-{node}"))
    copies = [pickle.loads(pickle.dumps(load)) for _ in range(2)]
    assert [int(c(2).decode()[0, 0, 0]) for c in copies] == [2, 2]
    assert copies[0]._dataset is copies[1]._dataset
    other = pickle.loads(pickle.dumps(fray.PackedImages(f"file://{tmp_path / 'p'}", cache_dir=str(tmp_path / "d"))))
    other(0)
    assert other._dataset is not copies[0]._dataset and (tmp_path / "d").is_dir()
    local = [pickle.loads(pickle.dumps(fray.PackedImages(tmp_path / "p"))) for _ in range(2)]
    assert local[0](1) is not None and local[1](1) is not None and local[0]._dataset is not local[1]._dataset
