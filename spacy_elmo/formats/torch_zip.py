"""torch's zip files (``torch.save``'s format since 1.6) checked before ``torch.load`` reads
them: every member read through its CRC-32 (which ``torch.load`` skips), no member marked
as a directory, no name given twice (torch would read the last copy without a word)."""

import zipfile
import zlib
from pathlib import Path

from ..errors import ElmoWeightsError, one_line_reason


def check_zip_members(path: Path) -> None:
    """Refuses a member name given twice or a member marked as a directory, then reads every
    member of a torch zip file through its CRC-32, which ``torch.load`` does not check: a
    flipped byte in a tensor's data would load as another value. Older files are bare pickles without checksums; a file saved
    with torch's CRC-32s turned off records 0 for every member, so neither is checked."""
    with path.open("rb") as f:
        if f.read(4) != b"PK\x03\x04":
            return
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_READ_ERRORS as err:
        raise ElmoWeightsError(
            f"{path}: cannot be read as a torch zip file ({one_line_reason(err)[:200]}): a truncated or damaged file"
        ) from err
    with archive:
        members = archive.infolist()
        seen = set()
        for member in members:
            # torch.save writes each name once; a second copy (zipfile only warns) is what
            # torch.load would read, whatever the first one holds.
            if member.filename in seen:
                raise ElmoWeightsError(
                    f"{path}: member {member.filename!r} appears twice, which torch.save never writes "
                    "(torch would load the last copy): the file was altered"
                )
            seen.add(member.filename)
            # torch's reader takes a member marked as a directory for an empty one, whatever
            # its CRC-32 says (a flipped attribute byte loaded another tensor's values).
            if member.is_dir() or member.external_attr & DOS_DIRECTORY:
                raise ElmoWeightsError(
                    f"{path}: member {member.filename!r} is marked as a directory, which torch.save never "
                    "writes: the file is damaged"
                )
        if any(member.CRC for member in members):
            for member in members:
                _check_zip_member(archive, member, path)


# What zipfile raises for a damaged archive or member (ValueError: a name that is not
# UTF-8, an offset out of range; zlib.error: damaged compressed data).
ZIP_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    OSError,
    NotImplementedError,
    ValueError,
    zlib.error,
)
DOS_DIRECTORY = 0x10  # the MS-DOS directory bit of a zip member's external attributes


def _check_zip_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: Path) -> None:
    try:
        data = archive.open(member)
    except (*ZIP_READ_ERRORS, RuntimeError) as err:  # RuntimeError: an encrypted member
        raise ElmoWeightsError(
            f"{path}: member {member.filename!r} has a damaged header ({one_line_reason(err)[:200]}): the file is damaged"
        ) from err
    with data:
        try:
            while data.read(1 << 20):
                pass
        except zipfile.BadZipFile as err:  # zipfile's only error once a member is open: its CRC-32
            raise ElmoWeightsError(
                f"{path}: member {member.filename!r} fails its CRC-32 check: the file is damaged; copy it again"
            ) from err
        except ZIP_READ_ERRORS as err:
            raise ElmoWeightsError(
                f"{path}: member {member.filename!r} cannot be read ({one_line_reason(err)[:200]}): "
                "a truncated or damaged file"
            ) from err
