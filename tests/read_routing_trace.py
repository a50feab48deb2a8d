"""Reads an ingot routing trace the way docs/routing-trace.md tells users to: the JSON header, then the records
memory-mapped with numpy. Prints one JSON object for tests/routing_trace.rs to compare with ingot's own reader."""
import json
import sys

import numpy as np

path = sys.argv[1]
with open(path, "rb") as f:
    head = f.read(16)
    assert head[:8] == b"INGOTRTR", "not a routing trace"
    version = int.from_bytes(head[8:12], "little")
    header_len = int.from_bytes(head[12:16], "little")
    header = json.loads(f.read(header_len))
dtype = np.dtype([tuple(field) for field in header["numpy_dtype"]])
assert dtype.itemsize == header["record_bytes"], (dtype.itemsize, header["record_bytes"])
records = np.memmap(path, dtype=dtype, mode="r", offset=16 + header_len)
print(json.dumps({
    "version": version,
    "count": int(records.shape[0]),
    "pos": records["pos"].tolist(),
    "token": records["token"].tolist(),
    "phase": records["phase"].tolist(),
    "experts": records["experts"].tolist(),
    "weights": records["weights"].astype(float).tolist(),
}))
