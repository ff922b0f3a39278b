"""Many machines: 2 processes on gloo (started as torchrun starts them: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) read disjoint parts that together are every sample exactly once:
a map-style source through DistributedSampler (DataLoader and fastprep.Loader) and through
fastprep.Loader without a sampler (it splits by the process group itself), and
fastprep.io.WebDataset, its rank taken from the process group, with 2 DataLoader workers a rank.
A checkpoint the two ranks write mid-epoch resumes at 3 ranks and at 1 (tests/loader/test_loader_elastic.py
has the table of world sizes, simulated in one process): every sample of the epoch exactly once."""

import itertools
import os
import pickle

import numpy as np
import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler

import fastprep
import fastprep.io as fio

from helpers.s3_server import free_port

pytestmark = pytest.mark.one_backend
h5py = pytest.importorskip("h5py")

WORLD, ITEMS, SHARDS, PER_SHARD = 2, 12, 8, 4


def _rank_main(rank: int, port: int, root: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    try:
        images = fio.HDF5Dataset(os.path.join(root, "data.h5"), "images", "labels")
        sampler = DistributedSampler(images, shuffle=True, seed=0)  # rank and world from the process group
        sampler.set_epoch(1)
        by_dataloader = [int(y) for _, ys in DataLoader(images, batch_size=4, sampler=sampler) for y in ys]
        by_loader = [int(y) for b in fastprep.Loader(images, 4, sampler=sampler, threads=2) for y in b.data[1]]
        by_itself = fastprep.Loader(images, 4, shuffle=True, seed=0, threads=2)  # no sampler: split by rank
        by_itself.set_epoch(1)
        split = [int(y) for b in by_itself for y in b.data[1]]
        elastic = fastprep.Loader(images, 2, shuffle=True, seed=0, threads=1)  # 3 steps of 2 an epoch a rank
        elastic.set_epoch(2)
        taken = [int(y) for b in itertools.islice(elastic, 2) for y in b.data[1]]
        split += [("elastic", taken, elastic.state_dict())]
        shards = fio.WebDataset(os.path.join(root, f"s-{{000..{SHARDS - 1:03d}}}.tar"), fields="cls", shuffle=True,
                                seed=0)
        shards.set_epoch(1)
        # A process started by mp.spawn spawns its DataLoader workers too (each re-imports torch: ~4 s
        # here); torchrun's ranks fork them, as this does.
        workers = DataLoader(shards, batch_size=None, num_workers=2, multiprocessing_context="fork")
        by_shards = [int(y) for y in workers]
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, (shards.rank, by_dataloader, by_loader, by_shards, split,
                                          (by_itself.rank, by_itself.world_size)))
        if rank == 0:
            with open(os.path.join(root, "seen.pkl"), "wb") as f:
                pickle.dump(gathered, f)
    finally:
        dist.destroy_process_group()


def test_two_ranks_together_read_every_sample_exactly_once(tmp_path):
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f.create_dataset("images", data=np.arange(ITEMS * 8 * 8 * 3, dtype=np.uint8).reshape(ITEMS, 8, 8, 3))
        f.create_dataset("labels", data=np.arange(ITEMS))
    fio.write_webdataset(({"cls": i} for i in range(SHARDS * PER_SHARD)), str(tmp_path / "s-%03d.tar"),
                         maxcount=PER_SHARD)
    mp.spawn(_rank_main, args=(free_port(), str(tmp_path)), nprocs=WORLD)
    with open(tmp_path / "seen.pkl", "rb") as f:
        gathered = pickle.load(f)
    assert [g[0] for g in gathered] == [0, 1]  # WebDataset took each rank from the process group
    (_, taken0, state), (_, taken1, _) = gathered[0][4].pop(), gathered[1][4].pop()  # the elastic part
    for what, k, n in (("DataLoader + DistributedSampler", 1, ITEMS), ("Loader + DistributedSampler", 2, ITEMS),
                       ("WebDataset, 2 workers a rank", 3, SHARDS * PER_SHARD),
                       ("Loader, split by itself", 4, ITEMS)):
        parts = [g[k] for g in gathered]
        assert all(parts) and sorted(parts[0] + parts[1]) == list(range(n)), (what, parts)
    assert gathered[0][1] == gathered[0][2]  # the Loader follows the sampler's order
    assert len(gathered[0][3]) == len(gathered[1][3])  # equal shards, as many on each rank: DDP's lock-step
    assert [g[5] for g in gathered] == [(0, 2), (1, 2)] and len(gathered[0][4]) == len(gathered[1][4])
    # The elastic part: 2 ranks took 2 steps each; rank 0's checkpoint resumes at 3 ranks and at 1.
    assert state["consumed"] == 8 and state["world_size"] == 2
    images = fio.HDF5Dataset(str(tmp_path / "data.h5"), "images", "labels")
    for world in (3, 1):
        rest = []
        for rank in range(world):
            loader = fastprep.Loader(images, 2, shuffle=True, seed=0, threads=1, rank=rank, world_size=world)
            loader.load_state_dict(state)
            loader.set_epoch(2)  # the checkpoint's epoch: its position is kept
            rest += [int(y) for b in loader for y in b.data[1]]
        every = taken0 + taken1 + rest  # every sample; the pad to a multiple of the world repeats fewer than it
        assert set(every) == set(range(ITEMS)) and len(every) - ITEMS == -(ITEMS - 8) % world, (world, every)
