"""setup.py's torch floor is what the code needs: every torch API the package calls
whose signature or behaviour arrived in a known release is listed here with that
release, and the declared floor is at least the newest of those the code uses."""

import re
from pathlib import Path

REPO = Path(__file__).parent.parent

# (what, a pattern that finds its use in spacy_elmo/, the torch release that brought it)
VERSIONED_APIS = [
    ("torch.is_autocast_enabled(device_type)", r"is_autocast_enabled\(\s*[\w\"']", (2, 4)),
    ("torch.get_autocast_dtype(device_type)", r"get_autocast_dtype\(", (2, 4)),
    ("AdamW(fused=...) on the CPU", r"AdamW\([^)]*fused=", (2, 4)),
    # pytorch/pytorch#132652 (August 2024, after 2.4's release): a list, not one tensor.
    ("torch.autograd.graph.increment_version of a list", r"increment_version\(\[", (2, 5)),
    # Private CPU feature queries, added in 2024 beside inductor's AMX GEMMs: 2.4 or 2.5
    # (not checked against 2.4), so 2.5.
    ("torch.cpu._is_avx512_bf16_supported / _is_amx_tile_supported", r"torch\.cpu\._is_a", (2, 5)),
    ("torch.cuda.is_bf16_supported(including_emulation=...)", r"including_emulation", (2, 5)),
    ("torch.amp.GradScaler(device)", r"torch\.amp\.GradScaler\(", (2, 3)),
    ("torch.nn.Module.set_submodule", r"\.set_submodule\(", (2, 3)),
    ("Optimizer.register_step_post_hook", r"register_step_post_hook\(", (2, 0)),
    ("torch.load(weights_only=...)", r"weights_only=", (1, 13)),
]


def declared_floor():
    found = re.search(
        r'"torch>=([\d.]+)[";]', (REPO / "setup.py").read_text(encoding="utf8")
    )  # the first: the oldest Python's
    assert found, "setup.py declares no torch floor"
    return tuple(int(part) for part in found.group(1).split("."))


def package_source() -> str:
    return "\n".join(p.read_text(encoding="utf8") for p in sorted((REPO / "spacy_elmo").rglob("*.py")))


def test_the_declared_floor_has_every_api_the_code_uses():
    source = package_source()
    used = [(what, version) for what, pattern, version in VERSIONED_APIS if re.search(pattern, source)]
    assert any(what.startswith("torch.is_autocast_enabled") for what, _ in used)  # the table finds uses
    newer = [(what, version) for what, version in used if version > declared_floor()]
    assert newer == [], f"setup.py's torch floor {declared_floor()} is older than these APIs need"


def test_the_readme_and_development_page_state_the_floor():
    floor = ".".join(map(str, declared_floor()))
    for page in (REPO / "README.md", REPO / "docs" / "development.md"):
        assert f"torch {floor} or later" in page.read_text(encoding="utf8"), page
