import threading

import numpy as np
import pytest
import torch

import fastprep
import fastprep.core._counter_rng as counter_rng
import fastprep.numba_kernels._counter_rng as nb_rng

from helpers.op_calls import native_available

pytestmark = pytest.mark.op_layer

# SplitMix64 started at 1234567: the reference outputs published with Vigna's generator.
SPLITMIX_1234567 = [6457827717110365317, 3203168211198807973, 9817491932198370423]
# Pinned outputs of fastprep's own functions: changing the generator breaks every saved seed.
# (Computed with a plain-Python transcription of counter_rng.h.)
KNOWN_WORDS = {(0, 0): 16294208416658607535, (-1, 5): 15212506146343009075,
               (2**63 - 1, 2**64 - 1): 6514504133438201533}
KNOWN_DERIVED = {(0, 0): 3246858695411730098, (42, 7): 5462329707490493304}


def _numba_word(seed, counter):
    # Typed scalars: Numba would otherwise reuse an int64 specialisation for counters >= 2**63.
    return int(nb_rng.random_word(np.int64(seed), np.uint64(counter)))


def _numba_derive(seed, stream):
    return int(nb_rng.derive_seed(np.int64(seed), np.int64(stream)))


def _impls():
    impls = [("python", fastprep.random_word, fastprep.derive_seed), ("numba", _numba_word, _numba_derive)]
    if native_available():
        from fastprep import _C
        impls.append(("native", _C.random_word, _C.derive_seed))
    return impls


@pytest.mark.parametrize("name,word,derive", _impls(), ids=lambda v: v if isinstance(v, str) else "")
def test_known_answers(name, word, derive):
    assert [word(1234567, i) for i in range(3)] == SPLITMIX_1234567
    for (seed, counter), expected in KNOWN_WORDS.items():
        assert word(seed, counter) == expected
    for (seed, stream), expected in KNOWN_DERIVED.items():
        assert derive(seed, stream) == expected


@pytest.mark.skipif(not native_available(), reason="needs the native module to compare against")
def test_native_and_numba_agree_on_random_inputs():
    from fastprep import _C
    rs = np.random.default_rng(0)
    for seed, counter, n in zip(rs.integers(-2**63, 2**63 - 1, 500, dtype=np.int64),
                                rs.integers(0, 2**63, 500, dtype=np.int64),
                                rs.integers(1, 2**32, 500, dtype=np.int64)):
        seed, counter, n = int(seed), int(counter), int(n)
        w = _C.random_word(seed, counter)
        assert w == fastprep.random_word(seed, counter)
        assert _C.derive_seed(seed, counter) == fastprep.derive_seed(seed, counter)
        assert _numba_word(seed, counter) == w and _numba_derive(seed, counter) == _C.derive_seed(seed, counter)
        assert _C.uniform_below(w, n) == int(nb_rng.uniform_below(np.uint64(w), np.uint64(n))) < n
        assert counter_rng.uniform_below(w, n) == _C.uniform_below(w, n)


def test_words_look_uniform():
    words = np.array([fastprep.random_word(7, i) for i in range(4096)], dtype=np.uint64)
    bits = np.unpackbits(words.view(np.uint8)).reshape(len(words), 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 0.05)  # each bit ~ Bernoulli(0.5); 5 sigma is 0.039


def test_derived_seeds_are_distinct_from_parent_words():
    derived = {fastprep.derive_seed(3, i) for i in range(1000)}
    words = {np.int64(np.uint64(fastprep.random_word(3, i))).item() for i in range(1000)}
    assert len(derived) == 1000 and not derived & words


def test_draw_seed_follows_torch_manual_seed():
    torch.manual_seed(123)
    a = [fastprep.draw_seed() for _ in range(3)]
    torch.manual_seed(123)
    assert [fastprep.draw_seed() for _ in range(3)] == a
    g = torch.Generator().manual_seed(5)
    b = fastprep.draw_seed(g)
    assert b == fastprep.draw_seed(torch.Generator().manual_seed(5))
    assert len(set(a)) == 3 and all(-2**63 <= s < 2**63 for s in a)


def test_draw_seed_is_torch_randint_over_int64():
    # The seeds every saved pipeline was drawn with: torch.randint(INT64_MIN, INT64_MAX) from the
    # same generator, whatever inference mode or thread the draws happen in.
    def reference(gen, n):
        return [int(torch.randint(-2**63, 2**63 - 1, (), dtype=torch.int64, generator=gen)) for _ in range(n)]

    torch.manual_seed(9)
    want = reference(None, 6)
    out = {}

    def in_new_thread():  # a fresh thread, so its first draw happens in inference mode
        torch.manual_seed(9)
        with torch.inference_mode():
            got = [fastprep.draw_seed() for _ in range(3)]
        out["got"] = got + [fastprep.draw_seed() for _ in range(3)]  # the next ones outside it
        out["gen"] = [fastprep.draw_seed(torch.Generator().manual_seed(4)) for _ in range(2)]

    t = threading.Thread(target=in_new_thread)
    t.start()
    t.join()
    assert out["got"] == want
    assert out["gen"] == reference(torch.Generator().manual_seed(4), 1) * 2


@pytest.mark.parametrize("call,match", [
    (lambda: fastprep.random_word(2**63, 0), "seed to fit in int64, got 9223372036854775808"),
    (lambda: fastprep.random_word(0, -1), "counter to be an int in"),
    (lambda: fastprep.derive_seed(1.5, 0), "seed to be an int, got float"),
])
def test_bad_seed_arguments(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_seeded_is_fork_rng_plus_manual_seed_without_touching_other_state():
    from fastprep.core._rng import seeded
    torch.manual_seed(1)
    expected_after = torch.rand(3)
    torch.manual_seed(1)
    with seeded(-12345):
        inside = torch.rand(4)
    assert torch.equal(torch.rand(3), expected_after)  # the outer stream is restored
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(-12345)
        assert torch.equal(torch.rand(4), inside)
    with pytest.raises(ZeroDivisionError), seeded(5):
        1 / 0  # noqa: B018 (restored on the way out of an exception too)
    torch.manual_seed(1)
    assert torch.equal(torch.rand(3), expected_after)


def test_item_seed_keys():
    from fastprep.core._rng import item_seed, key_stream
    assert item_seed(3, 7) == fastprep.derive_seed(fastprep.derive_seed(3, 0), 7)
    assert item_seed(3, 7, epoch=2) != item_seed(3, 7)
    assert key_stream("a/1.jpg") == key_stream(b"a/1.jpg") == -5535465543881084416  # pinned: keys must seed the same forever
    assert key_stream(np.int64(9)) == 9
    with pytest.raises(TypeError, match="expected key to be an int, str or bytes, got float"):
        key_stream(1.5)


def test_numpy_arrays_give_the_bits_of_ints():
    """A chunk's parameters are drawn on uint64 arrays (the Loader, FusionPlan): elementwise the
    same words, derived seeds, bounded integers and item seeds as one sample's ints."""
    from fastprep.core._rng import item_seed, item_seeds
    rs = np.random.default_rng(3)
    seeds = np.concatenate([rs.integers(-2**63, 2**63 - 1, 200, dtype=np.int64), [-2**63, -1, 0, 2**63 - 1]])
    words = counter_rng.random_word(seeds.view(np.uint64), 5)
    assert words.tolist() == [counter_rng.random_word(int(s), 5) for s in seeds]
    derived = counter_rng.derive_seed(seeds.view(np.uint64), np.arange(len(seeds), dtype=np.uint64))
    assert derived.tolist() == [counter_rng.derive_seed(int(s), k) for k, s in enumerate(seeds)]
    for n in (rs.integers(1, 2**32, len(seeds)), rs.integers(1, 2**62, len(seeds))):
        got = counter_rng.uniform_below(words, n)
        assert got.dtype == np.int64 and got.tolist() == [counter_rng.uniform_below(int(w), int(m)) for w, m in zip(words, n)]
    keys = [0, 5, 2**40, 17]
    assert item_seeds(9, keys, 3).tolist() == [item_seed(9, k, 3) for k in keys]
