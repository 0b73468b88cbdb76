import dataclasses
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

import fetch
from spacy_elmo.io import file_sha256

from .conftest import REPO


def make_tgz(path: Path, members: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def make_zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def asset_for(archive: Path, member: fetch.Member, n_files: int, sha256=None) -> fetch.Asset:
    package = fetch.Package("npm", "fake", "1.0.0", archive.name, sha256 or file_sha256(archive))
    return fetch.Asset("fake", package, member, n_files, "test asset")


def listed(url: str, name: str = "fake-1.0.0.tgz") -> dict:
    """What ``fetch.listed_assets`` reads from a project.yml ``assets`` entry (no md5: weasel then skips its check)."""
    return {name: {"dest": f"assets/packages/{name}", "url": url}}


@pytest.fixture
def tgz_asset(tmp_path):
    archive = make_tgz(tmp_path / "fake-1.0.0.tgz", {
        "package/data/a.txt": b"alpha\n",
        "package/data/sub/b.txt": b"beta\n",
        "package/lib/index.js": b"code",
    })
    return asset_for(archive, fetch.Member("package/data/*.txt", strip="package/data/"), 2)


def test_weasel_downloads_the_listed_asset_then_only_the_data_files_are_unpacked(tgz_asset, tmp_path):
    url = (tmp_path / "fake-1.0.0.tgz").as_uri()
    out = fetch.fetch_asset(tgz_asset, tmp_path / "assets", tmp_path / "cache", listed(url))
    assert (out / "a.txt").read_text() == "alpha\n" and (out / "sub" / "b.txt").read_text() == "beta\n"
    assert not (out / "index.js").exists() and not (out / "lib").exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fake-1.0.0.tgz"]  # no .partial left
    manifest = json.loads((out / fetch.MANIFEST).read_text())
    assert manifest["sha256"] == tgz_asset.package.sha256 and sorted(manifest["files"]) == ["a.txt", "sub/b.txt"]


def test_a_package_file_already_in_the_cache_is_used_without_downloading(tgz_asset, tmp_path, monkeypatch):
    # as `spacy project assets` leaves it, or a user offline copies it in
    cache = tmp_path / "cache"
    cache.mkdir()
    (tmp_path / "fake-1.0.0.tgz").rename(cache / "fake-1.0.0.tgz")

    def no_download(*args):
        raise AssertionError("downloaded a file that was there")

    monkeypatch.setattr(fetch, "download_asset", no_download)
    monkeypatch.setattr(fetch, "download_with_client", no_download)
    out = fetch.fetch_asset(tgz_asset, tmp_path / "assets", cache, listed("http://127.0.0.1:9/fake-1.0.0.tgz"))
    assert (out / "a.txt").read_text() == "alpha\n"


def test_second_run_skips_and_a_changed_file_is_restored(tgz_asset, tmp_path, monkeypatch):
    assets, cache = tmp_path / "assets", tmp_path / "cache"
    urls = listed((tmp_path / "fake-1.0.0.tgz").as_uri())
    out = fetch.fetch_asset(tgz_asset, assets, cache, urls)
    calls = []
    monkeypatch.setattr(fetch, "get_package", lambda *args: calls.append(args) or cache / "fake-1.0.0.tgz")
    fetch.fetch_asset(tgz_asset, assets, cache, urls)
    assert calls == []
    (out / "a.txt").write_text("edited")
    fetch.fetch_asset(tgz_asset, assets, cache, urls)
    assert len(calls) == 1 and (out / "a.txt").read_text() == "alpha\n"


def test_nested_archives_are_unpacked(tmp_path):
    inner = make_zip({"News.csv": b"id,text\n1,hello\n", "Other.csv": b"x"})
    archive = make_tgz(tmp_path / "cache" / "pkg-1.0.tar.gz", {"pkg-1.0/data/News.zip": inner})
    asset = asset_for(archive, fetch.Member("pkg-1.0/data/News.zip", inner=fetch.Member("News.csv")), 1)
    out = fetch.fetch_asset(asset, tmp_path / "assets", tmp_path / "cache")
    assert sorted(p.name for p in out.iterdir()) == [fetch.MANIFEST, "News.csv"]


def test_sha256_mismatch_fails_loudly_and_keeps_no_bad_file(tgz_asset, tmp_path):
    wrong = dataclasses.replace(tgz_asset, package=dataclasses.replace(tgz_asset.package, sha256="0" * 64))
    with pytest.raises(fetch.FetchError) as err:
        fetch.fetch_asset(wrong, tmp_path / "assets", tmp_path / "cache", listed((tmp_path / "fake-1.0.0.tgz").as_uri()))
    assert f"expected {'0' * 64}" in str(err.value) and f"actual   {tgz_asset.package.sha256}" in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == [] and not (tmp_path / "assets" / "fake").exists()


def test_network_failure_tries_the_registry_client_then_says_what_to_do(tgz_asset, tmp_path, monkeypatch):
    def client_fails(package, dest):
        raise fetch.FetchError("npm: network unreachable")

    monkeypatch.setattr(fetch, "download_with_client", client_fails)
    package = tgz_asset.package
    with pytest.raises(fetch.FetchError) as err:
        fetch.get_package(package, tmp_path / "cache", listed("http://127.0.0.1:9/fake-1.0.0.tgz"))
    message = str(err.value)
    assert "project.yml asset http://127.0.0.1:9/fake-1.0.0.tgz:" in message
    assert "npm pack: npm: network unreachable" in message
    assert f"put fake-1.0.0.tgz (sha256 {package.sha256}) at {tmp_path / 'cache' / 'fake-1.0.0.tgz'}" in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_changed_package_layout_or_an_escaping_member_is_refused(tmp_path):
    archive = make_tgz(tmp_path / "c" / "fake-1.0.0.tgz", {"package/data/a.txt": b"a", "package/data/../../evil.txt": b"x"})
    with pytest.raises(fetch.FetchError, match="outside the asset folder"):
        fetch.fetch_asset(asset_for(archive, fetch.Member("package/data/*", strip="package/data/"), 2), tmp_path / "a", tmp_path / "c")
    with pytest.raises(fetch.FetchError, match="1 files match 'package/data/a.txt', expected 3"):
        fetch.fetch_asset(asset_for(archive, fetch.Member("package/data/a.txt", strip="package/data/"), 3), tmp_path / "a", tmp_path / "c")
    assert list((tmp_path / "a").iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(fetch.ASSETS))
def test_real_registry_package_matches_its_pin(name, tmp_path):
    """Downloads as a fetch step does: project.yml's asset URL by weasel, else the registry's client."""
    listed_here = fetch.listed_assets(REPO)
    out = fetch.fetch_asset(fetch.ASSETS[name], tmp_path / "assets", tmp_path / "cache", listed_here)
    assert len(json.loads((out / fetch.MANIFEST).read_text())["files"]) == fetch.ASSETS[name].n_files
