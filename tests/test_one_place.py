"""One fact in one place (issue 75 items 5 and 6): the component's defaults, the one bounded
LRU behind both caches, and the configs' cache size beside what the docs say of it."""

import re
from pathlib import Path

import numpy
import torch

from spacy_elmo.bilm.type_cache import TypeCache
from spacy_elmo.bounded_lru import BoundedLru
from spacy_elmo.layers.bilm_output_cache import LayerCache
from spacy_elmo.pipeline.elmo import DEFAULT_SETTINGS
from spacy_elmo.settings import ElmoSettings

REPO = Path(__file__).resolve().parent.parent


def test_the_component_s_defaults_are_the_settings_own():
    """Failed before: DEFAULT_SETTINGS said cache_size_mb 1024 and ElmoSettings 0."""
    assert DEFAULT_SETTINGS == ElmoSettings().component_cfg()
    assert DEFAULT_SETTINGS["cache_size_mb"] == 1024


def test_the_bounded_lru_drops_the_least_recently_used_first():
    lru = BoundedLru(3)
    for key in "abc":
        assert lru.put(key, key.upper())
    assert lru.get("a") == "A"  # a is now the most recent: b goes first
    lru.put("d", "D")
    assert "b" not in lru and [k for k in "acd" if k in lru] == ["a", "c", "d"]
    assert lru.evictions == 1 and lru.total == 3
    by_size = BoundedLru(10, cost=len)
    assert not by_size.put("big", "x" * 11)  # more than the whole bound: not kept
    assert by_size.put("six", "x" * 6) and by_size.put("five", "x" * 5)
    assert "six" not in by_size and by_size.total == 5


def test_both_caches_are_the_one_lru():
    """Failed before: each cache had an OrderedDict and an eviction loop of its own."""
    types = TypeCache(max_types=2)
    layers = LayerCache(max_mb=1)
    assert isinstance(types._vectors, BoundedLru) and isinstance(layers._entries, BoundedLru)
    chars = torch.tensor([[1, 2], [3, 4], [5, 6]])
    types.encode(chars, lambda rows: rows.float(), "w")
    assert len(types) == 2  # the bound: the batch's last two types
    half = numpy.zeros(2**20 // 8, dtype="float32")  # 0.5 MB each
    for key in ("a", "b", "c"):
        layers.put(key, half.copy())
    assert len(layers) == 2 and layers.evictions == 1 and layers.get("a") is None and layers.nbytes == 2**20


def _cache_sizes_in_configs():
    sizes = {}
    for path in sorted((REPO / "configs").rglob("*.cfg")):
        match = re.search(r"^cache_size_mb = (\S+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
        if match:
            sizes[path.relative_to(REPO).as_posix()] = float(match.group(1))
    return sizes


def test_the_configs_cache_size_is_the_documented_default_or_the_docs_say_why_not():
    """Failed before: the configs set 4096, the docs gave the default 1024 and no reason."""
    component = (REPO / "docs" / "component.md").read_text(encoding="utf-8")
    documented = re.search(r"^\| `cache_size_mb` \| (\d+) \|", component, re.MULTILINE)
    assert documented and float(documented.group(1)) == DEFAULT_SETTINGS["cache_size_mb"]
    training = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    why = re.search(r"The shipped configs set `cache_size_mb = (\d+)`", training)
    sizes = _cache_sizes_in_configs()
    assert sizes, "no shipped config sets cache_size_mb"
    if why is None:
        assert set(sizes.values()) == {DEFAULT_SETTINGS["cache_size_mb"]}
    else:
        assert set(sizes.values()) == {float(why.group(1))}, sizes
        assert f"the shipped training configs set {why.group(1)}" in component
