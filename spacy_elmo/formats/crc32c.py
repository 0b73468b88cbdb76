"""CRC-32C (Castagnoli), as TensorFlow's checkpoints store it, in numpy.

A byte-at-a-time loop in Python would take minutes over a published biLM's 375 MB;
CRC is linear over GF(2), so the data is cut into equal chunks whose CRCs are
computed side by side (one numpy step per byte position), then joined.
"""

import numpy

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8  # TensorFlow's (LevelDB's) masking constant
_SMALL = 1 << 14  # below this, the plain loop is as fast


def _make_table() -> numpy.ndarray:
    table = numpy.arange(256, dtype=numpy.uint32)
    for _ in range(8):
        table = numpy.where(table & 1, (table >> 1) ^ numpy.uint32(_POLY), table >> 1).astype(numpy.uint32)
    return table


_TABLE = _make_table()
_TABLE_LIST = [int(v) for v in _TABLE]


def _update_small(state: int, data: bytes) -> int:
    table = _TABLE_LIST
    for byte in data:
        state = table[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state


def _zeros_operator(length: int) -> list:
    """The linear map "feed ``length`` zero bytes" on a 32-bit state, as four
    byte-indexed tables (state byte k's contribution in table k)."""
    basis = numpy.uint32(1) << numpy.arange(32, dtype=numpy.uint32)
    for _ in range(length):
        basis = _TABLE[basis & 0xFF] ^ (basis >> 8)
    values = numpy.arange(256, dtype=numpy.uint32)
    tables = []
    for k in range(4):
        table = numpy.zeros(256, dtype=numpy.uint32)
        for bit in range(8):
            table ^= numpy.where((values >> bit) & 1, basis[8 * k + bit], numpy.uint32(0)).astype(numpy.uint32)
        tables.append([int(v) for v in table])
    return tables


def _update_zero_state(data: numpy.ndarray) -> int:
    """The CRC register after ``data`` from a zero state, chunk-parallel. Leading zero
    bytes leave a zero state as it is, so the data is padded in front to whole chunks."""
    chunk = max(256, int(len(data) ** 0.5))
    n_chunks = -(-len(data) // chunk)
    padded = numpy.zeros(n_chunks * chunk, dtype=numpy.uint8)
    padded[len(padded) - len(data) :] = data
    columns = numpy.ascontiguousarray(padded.reshape(n_chunks, chunk).T)
    states = numpy.zeros(n_chunks, dtype=numpy.uint32)
    for position in range(chunk):
        states = _TABLE[(states ^ columns[position]) & 0xFF] ^ (states >> 8)
    t0, t1, t2, t3 = _zeros_operator(chunk)
    state = 0
    for value in states.tolist():
        state = t0[state & 0xFF] ^ t1[(state >> 8) & 0xFF] ^ t2[(state >> 16) & 0xFF] ^ t3[state >> 24] ^ value
    return state


def crc32c(data: bytes) -> int:
    """The CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    if len(data) < _SMALL:
        return _update_small(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    array = numpy.frombuffer(data, dtype=numpy.uint8).copy()
    # A register starting at 0xFFFFFFFF is one starting at zero over data whose first
    # four bytes are inverted.
    array[:4] ^= 0xFF
    return _update_zero_state(array) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The CRC as TensorFlow stores it: rotated and offset, so that a CRC of data
    holding CRCs does not degenerate."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF
