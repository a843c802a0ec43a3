"""A development server given an epoch built elsewhere (`prebuilt`) adopts it without
building: as a node of a Ray evaluation run serves the driver's epoch, on a directory that
holds no project sources."""

from __future__ import annotations

from pathlib import Path

from _projects import config, write_project

from bundle_contract._build import build_project
from bundle_server._dev_server import start_dev_server
from bundle_server.project.prebuilt import Prebuilt


def test_a_server_adopts_a_prebuilt_epoch_on_a_directory_without_sources(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project", config())
    built = build_project(project, epochs=tmp_path / "epochs")
    assert built.ok and built.epoch and built.artifact and built.config
    node = tmp_path / "node"
    node.mkdir()
    prebuilt = Prebuilt(built.epoch, Path(built.artifact), built.config)
    with start_dev_server(node, watch=False, install_hosts=["host_a"], prebuilt=prebuilt) as server:
        assert server.project is not None
        assert server.project.first_build.wait(30)
        artifact = server.status()["artifact"]
        assert artifact["state"] == "active"
        assert artifact["activeEpoch"]["id"] == built.epoch["id"]
        # Placed under the node's own state, installed for the host asked for alone.
        assert Path(artifact["activeEpoch"]["manifestPath"]).is_relative_to(node)
        attached = server.project.attachment("host_a")
        assert attached is not None and attached.epoch_id == built.epoch["id"]
        assert (attached.plugin_dir / "hooks" / "hooks.json").is_file()
        assert server.project.attachment("host_b") is None
        assert server.project.adopted_config() == (built.epoch["id"], built.config)
    assert sorted(p.name for p in node.iterdir()) == [".bundle"]  # no sources were needed
