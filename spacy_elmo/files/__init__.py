"""File safety, one policy for the library, one module per job: ``paths`` (what a path is, whether
it can be read or written), ``atomic`` (writes a kill cannot tear), ``locks`` (one writer per
output), ``disk_space`` (free space and full disks), ``text_lines`` (UTF-8 lines), ``json_files``
(JSON limits, JSONL) and ``hashing`` (sha256)."""
