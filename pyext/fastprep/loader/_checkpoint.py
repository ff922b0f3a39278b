"""fastprep.Loader's checkpoint: where the loader is (``state_dict``) and the resume from it
(``load_state_dict``).

A checkpoint is self-contained: it holds everything the epoch's order depends on, so that the
resumed job delivers exactly the samples the consumer had not received, whatever the resumed
Loader's own settings. Besides the position (this rank's ``position``; the epoch's global
``consumed``, see loader/_ranks.py), it keeps the ``seed`` and ``epoch``, the ``world_size`` the
order was made for (``order_world``), the ``shuffle``, the dataset's ``samples`` and, with
``shuffle="shards"``, the ``shard_window`` and the ``shard_table`` (a digest of ``item_shards``).
Resumed under other settings, the rest of the epoch is either replayed in the saved order (another
world size, another shard window: the next epochs use the Loader's own) or refused by a ValueError
naming the setting and both values (another shuffle, dataset length or shard table: the saved order
cannot be made again, so no resume could deliver each remaining sample once). A state_dict from
before a key was kept resumes as it did then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fastprep.loader._ranks as ranks
from fastprep.core._args import check_int
from fastprep.core._bad_samples import BadSamples
from fastprep.core._rng import check_epoch, seed_argument
from fastprep.loader._order import Order, saved_indices
from fastprep.loader._settings import LoaderSettings
from fastprep.loader._shard_order import item_shards, table_digest


@dataclass
class PassRecord:
    """The pass a checkpoint describes: its epoch and seed, the order it iterates (`indices`: this
    rank's part of the global order made for `order_world` ranks with `window`, from global position
    `base`), and the samples of it the consumer received (`position`)."""

    epoch: int
    seed: int
    order_world: int
    window: int
    base: int = 0
    position: int = 0
    indices: list[int] | None = None


def order_settings(shuffle: bool | str, dataset: Any, window: int) -> dict[str, Any]:
    """What the order of an epoch depends on besides seed, epoch and world size."""
    settings: dict[str, Any] = {"shuffle": shuffle, "samples": len(dataset)}
    if shuffle == "shards":
        settings.update(shard_window=window, shard_table=table_digest(item_shards(dataset)))
    return settings


def state_of(settings: LoaderSettings, order: Order, bad_samples: BadSamples, record: PassRecord,
             resume: tuple[int, list[int] | None] | None) -> dict[str, Any]:
    """Loader.state_dict of a Loader with `settings` over `order` (its dataset's; with its sampler):
    the pass `record` (`resume`: loaded and not iterated yet)."""
    state = {"seed": record.seed, "epoch": record.epoch, "position": record.position}
    if settings.on_error != "raise":  # under "raise" there are none to carry: the state is as it always was
        state["bad_samples"] = bad_samples.state_dict()
    indices = resume[1] if resume is not None else record.indices
    if order.sampler is not None:
        if indices is not None:  # the pass being iterated
            state["indices"] = list(indices)
        return state
    # where the ranks are in the epoch's global order: any world size resumes
    world = settings.world_size
    consumed = record.base + record.position * world if indices is None else ranks.consumed(
        record.base, record.position, world, indices, settings.batch_size, settings.drop_last, len(order.dataset))
    state.update(world_size=world, rank=settings.rank, consumed=consumed, order_world=record.order_world)
    state.update(order_settings(settings.shuffle, order.dataset, record.window))
    return state


def _refuse(setting: str, saved: Any, own: Any, why: str) -> ValueError:
    return ValueError(f"Loader.load_state_dict: the state_dict's epoch order was made with {setting}={saved!r}; "
                      f"this Loader has {setting}={own!r}: {why}")


def saved_window(shuffle: bool | str, order: Order, state: dict[str, Any]) -> int:
    """The shard window to replay the checkpoint's epoch with (this Loader's when the state says
    none); refuses a state whose order cannot be made again here (see the module)."""
    if "shuffle" in state and state["shuffle"] != shuffle:
        # A sample-level order is saved as True; shuffle="global" makes it whatever the dataset (True is
        # made shard-aware over a remote pack larger than its cache, and would be refused again).
        again = "'global'" if state["shuffle"] is True else repr(state["shuffle"])
        raise _refuse("shuffle", state["shuffle"], shuffle,
                      f"the rest of that epoch is in another order; make the Loader with shuffle={again} to resume it")
    if "samples" in state and state["samples"] != len(order.dataset):
        raise _refuse("samples", state["samples"], len(order.dataset),
                      "its dataset had another length (a state_dict of another dataset?)")
    if shuffle != "shards" or "shard_window" not in state:
        return order.window
    if "shard_table" in state:
        table = table_digest(item_shards(order.dataset))
        if state["shard_table"] != table:
            raise _refuse("shard_table", state["shard_table"], table,
                          "its dataset's item_shards differ (re-packed? another pack?), so the saved order "
                          "cannot be made again")
    return check_int("Loader.load_state_dict", "shard_window", state["shard_window"], 1)


def load(settings: LoaderSettings, order: Order, bad_samples: BadSamples, state: dict[str, Any]
         ) -> tuple[PassRecord, tuple[int, list[int] | None]]:
    """Loader.load_state_dict of a Loader with `settings` over `order`: (the resumed pass's record,
    (its start, its indices)); `bad_samples` loaded."""
    missing = [k for k in ("seed", "epoch", "position") if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"Loader.load_state_dict: expected a dict from Loader.state_dict(), missing {missing}")
    if order.iterable:
        raise TypeError("Loader.load_state_dict: an iterable dataset cannot be resumed mid-epoch by fastprep")
    seed = seed_argument("Loader.load_state_dict", "seed", state["seed"])
    epoch = check_epoch("Loader.load_state_dict", state["epoch"])
    position = check_int("Loader.load_state_dict", "position", state["position"], 0)
    saved_world = check_int("Loader.load_state_dict", "world_size", state.get("world_size", 1), 1)
    if saved_world != 1 and order.sampler is not None:
        raise ValueError(f"Loader.load_state_dict: the state_dict was written over {saved_world} ranks that "
                         f"split the epoch themselves; it resumes in a Loader without a sampler")
    consumed = check_int("Loader.load_state_dict", "consumed", state.get("consumed", position), 0)
    order_world = check_int("Loader.load_state_dict", "order_world", state.get("order_world", saved_world), 1)
    window = saved_window(settings.shuffle, order, state) if order.sampler is None else order.window
    # elastic (loader/_ranks.py) unless the checkpoint is a plain position in a one-rank order
    # (a pass resumed from another world size is at `consumed` of that world's order, not at `position`)
    if order.sampler is None and (saved_world != 1 or settings.world_size != 1 or order_world != 1
                                   or consumed != position):
        if consumed > len(order.dataset):
            raise ValueError(f"Loader.load_state_dict: consumed={consumed} is past the epoch's "
                             f"{len(order.dataset)} samples: a state_dict of another dataset?")
        indices = order.indices(seed, epoch, consumed, order_world, window)
        record, resume = PassRecord(epoch, seed, order_world, window, base=consumed), (0, indices)
    else:
        indices = saved_indices(state.get("indices"), order.dataset)
        if indices is None and order.sampler is None:  # the saved order, made again (its window, not this Loader's)
            indices = order.indices(seed, epoch, 0, 1, window)
        record, resume = PassRecord(epoch, seed, settings.world_size, window, position=position), (position, indices)
    if "bad_samples" in state:  # a checkpoint from before the policy has none: the count starts at 0
        bad_samples.load_state_dict(state["bad_samples"])
    return record, resume
