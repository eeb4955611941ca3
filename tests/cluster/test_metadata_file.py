"""The single-broker metadata store's file, ``__cluster_metadata/metadata.json``."""

from __future__ import annotations

import pytest

from litemq.cluster.metadata import ClusterMetadata


@pytest.mark.parametrize("content", [b"{garbage", b"\xff\xfe{}", b"[1, 2]", b"{}"])
def test_an_unreadable_metadata_file_is_named_in_the_error(tmp_path, content):
    """A broker refuses to start on a metadata.json it cannot read, naming the file (it said
    "cannot start broker: Expecting property name ..." with no file, or a KeyError traceback)."""
    ClusterMetadata(tmp_path)
    path = tmp_path / "__cluster_metadata" / "metadata.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="metadata.json"):
        ClusterMetadata(tmp_path)
