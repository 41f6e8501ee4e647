"""Ray actors of several GPUs each (`--ray-gpus-per-actor`): the actor resources that reach Ray, on a local instance
that declares 2 GPUs (none exist here: the actors load on the CPU, but Ray schedules them by the GPUs asked for)."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import mia_core
from mia_core.cli.groups import Backend
from mia_core.model.options import ModelOptions, ModelRef
from mia_core.runs.ray_driver import RayOptions, actor_plan
from mia_core.scoring import score_texts

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason='the Ray backend is optional: pip install "mia-lens[scale]"')
#: One Ray instance at a time: the Ray tests run on one xdist worker (an instance is sized to both CPUs).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory):
    """A local Ray instance on 127.0.0.1 that declares 2 GPUs (Ray counts them; nothing here uses CUDA)."""
    with pytest.MonkeyPatch.context() as env:  # a module's fixture: the function-scoped monkeypatch is not at hand
        env.setenv("MIA_LENS_CACHE", str(tmp_path_factory.mktemp("worker-cache")))
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-model")
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0, max_positions=64).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_actor_plan_gives_each_actor_its_gpus():
    eight = {"CPU": 64.0, "GPU": 8.0}
    assert actor_plan(eight, RayOptions(), n_chunks=100) == (8, {"num_gpus": 1})  # default: one GPU each
    assert actor_plan(eight, RayOptions(gpus_per_actor=4), n_chunks=100) == (2, {"num_gpus": 4})
    assert actor_plan(eight, RayOptions(gpus_per_actor=3), n_chunks=100) == (2, {"num_gpus": 3})  # 2 GPUs idle
    assert actor_plan(eight, RayOptions(gpus_per_actor=2, actors=1), n_chunks=100) == (1, {"num_gpus": 2})
    assert actor_plan(eight, RayOptions(gpus_per_actor=2, actors=9), n_chunks=100) == (4, {"num_gpus": 2})
    assert actor_plan(eight, RayOptions(gpus_per_actor=2), n_chunks=3) == (3, {"num_gpus": 2})
    assert actor_plan({"CPU": 4.0}, RayOptions(), n_chunks=100) == (4, {"num_cpus": 1})  # no GPUs: CPU actors
    with pytest.raises(ValueError, match="--ray-gpus-per-actor 9: the Ray cluster has 8 GPU"):
        actor_plan(eight, RayOptions(gpus_per_actor=9), n_chunks=1)
    with pytest.raises(ValueError, match="has 0 GPU.*leave the option out to run CPU actors"):
        actor_plan({"CPU": 4.0}, RayOptions(gpus_per_actor=1), n_chunks=1)


def test_the_command_line_option_reaches_the_ray_options(model_dir, tmp_path):
    model = ModelRef(str(model_dir), ModelOptions(max_memory="cuda:0=20GiB,cuda:1=20GiB"))
    options = Backend.checked("ray", gpus_per_actor=2).where(model)["ray_options"]
    assert options.gpus_per_actor == 2 and options.model.options.max_memory == "cuda:0=20GiB,cuda:1=20GiB"
    assert Backend.checked("ray").where(model)["ray_options"].gpus_per_actor is None
    (tmp_path / "t.txt").write_text("One text to score.")
    common = ["score", "--model", model_dir, "--input", tmp_path / "t.txt", "--output", tmp_path / "s.csv"]
    code, _, err = run_cli(*common, "--ray-gpus-per-actor", 2)
    assert code == 2 and err.strip().splitlines()[-1] == "error: --ray-gpus-per-actor needs --backend ray"
    code, _, err = run_cli(*common, "--backend", "ray", "--ray-gpus-per-actor", 0)
    assert code == 2 and err.strip().splitlines()[-1] == "error: --ray-gpus-per-actor must be at least 1 (got 0)"


def test_an_actor_of_two_gpus_is_scheduled_and_scores_as_local(gpu_cluster, model_dir, tmp_path):
    texts = pd.DataFrame({"text": random_texts(8, seed=5)})
    texts.to_csv(tmp_path / "texts.csv", index=False)
    common = ["score", "--model", model_dir, "--input", tmp_path / "texts.csv", "--methods", "loss,min_k_pp",
              "--backend", "ray"]
    code, _, err = run_cli(*common, "--output", tmp_path / "scores.csv", "--ray-gpus-per-actor", 2)
    assert code == 0, err
    local = score_texts(mia_core.load_model(str(model_dir)), texts["text"].tolist(), ["loss", "min_k_pp"], k=0.2)
    scores = pd.read_csv(tmp_path / "scores.csv")
    np.testing.assert_allclose(scores[["loss", "min_k_pp"]].to_numpy(), local.to_numpy(), atol=1e-4, rtol=0)
    # three GPUs per actor on a cluster of two: refused before any actor waits for GPUs that never come
    code, _, err = run_cli(*common, "--output", tmp_path / "more.csv", "--ray-gpus-per-actor", 3)
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "error: --ray-gpus-per-actor 3: the Ray cluster has 2 GPU(s)"
