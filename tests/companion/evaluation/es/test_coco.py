import json
import shutil
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("cocoex")

from hf_ext.companion.es import ESConfig, SepCMAES  # noqa: E402
from hf_ext.companion.es.config import default_popsize as es_default_popsize  # noqa: E402
from hf_ext.companion.evaluation.es import coco  # noqa: E402
from hf_ext.companion.evaluation.es.coco import (  # noqa: E402
    INDEX,
    SETTINGS,
    CocoConfig,
    algorithm_folders,
    default_popsize,
    noise_free_values,
    read_index,
    run_coco,
    run_folder,
)
from hf_ext.companion.evaluation.es.compare import TARGETS, ecdf  # noqa: E402


def test_the_suite_and_misranking_take_the_es_default_popsize_and_its_check():
    """One home for popsize: the ES's default and check, which the suite's generations and misranking reuse."""
    assert coco.default_popsize is es_default_popsize
    for dimension in (*coco.DIMENSIONS, 1, 7, 100, 1000):
        assert SepCMAES(np.zeros(dimension), ESConfig()).popsize == coco.generation_length(None, dimension)
    takers = {
        "ESConfig": lambda popsize: ESConfig(popsize=popsize),
        "CocoConfig": lambda popsize: CocoConfig(popsize=popsize),
        "misranking_by_generation": lambda popsize: coco.misranking_by_generation([0.0] * 4, [0.0] * 4, popsize),
    }
    for popsize in (1, 2.5, True, "8"):
        for owner, take in takers.items():
            # a value of another type is the config's field-type TypeError, a small integer the ES's ValueError
            with pytest.raises((TypeError, ValueError), match=f"^{owner}: `popsize` must be an integer"):
                take(popsize)
    with pytest.raises(ValueError, match="`popsize` must be an integer >= 2, got None"):
        coco.misranking_by_generation([0.0] * 4, [0.0] * 4, None)


def _config(tmp_path, **fields):
    settings = {
        "methods": ["rb_pem"],
        "functions": [101, 125],
        "instances": [1],
        "dimension": 2,
        "budget_multipliers": [20],
        "result_folder": str(tmp_path / "coco"),
        "workers": 1,
    }
    return CocoConfig(**settings | fields)


def test_writes_coco_folders_and_index(tmp_path):
    records = run_coco(_config(tmp_path))
    assert [(r["function"], r["evaluations"]) for r in records] == [(101, 40), (125, 40)]
    folder = run_folder(tmp_path / "coco", "rb_pem", 20, 101, 1, 2)
    assert folder == tmp_path / "coco" / "exdata" / "rb_pem_20D" / "f101_i01_d2"
    assert "algId = 'rb_pem_20D'" in (folder / "bbobexp_f101.info").read_text()
    dat = (folder / "data_f101" / "bbobexp_f101_DIM2.dat").read_text()
    assert "noise-free fitness" in dat
    assert records[0]["final"] == records[0]["trajectory"][-1][1] >= 0


def test_resume_skips_completed_runs_and_redoes_cut_off_ones(tmp_path):
    config = _config(tmp_path)
    first = run_coco(config)
    index = tmp_path / "coco" / INDEX
    lines = index.read_text().splitlines()
    index.write_text(lines[0] + "\n" + lines[1][:20])  # the second run was cut off while writing its line
    kept = run_folder(tmp_path / "coco", "rb_pem", 20, 101, 1, 2) / "bbobexp_f101.info"
    stamp = kept.stat().st_mtime_ns
    again = run_coco(config)
    assert kept.stat().st_mtime_ns == stamp  # not rerun
    assert again == first  # the same seed reruns the cut-off run identically
    assert len(read_index(tmp_path / "coco")) == 2
    assert not (tmp_path / "coco" / "exdata" / "rb_pem_20D" / "f125_i01_d2-001").exists()
    json.loads(index.read_text().splitlines()[-1])


def test_a_listed_run_whose_folder_is_gone_is_redone(tmp_path):
    config = _config(tmp_path)
    first = run_coco(config)
    gone = run_folder(tmp_path / "coco", "rb_pem", 20, 125, 1, 2)
    shutil.rmtree(gone)
    assert run_coco(config) == first
    assert (gone / "bbobexp_f125.info").exists() and len(read_index(tmp_path / "coco")) == 2


def test_a_rerun_with_another_seed_is_refused_in_a_new_process(tmp_path):
    run_coco(_config(tmp_path, functions=[101]))
    rerun = (
        "from hf_ext.companion.evaluation.es.coco import CocoConfig, run_coco; "
        f"run_coco(CocoConfig(methods=['rb_pem'], functions=[101], instances=[1], dimension=2, "
        f"budget_multipliers=[20], seed=1, result_folder={str(tmp_path / 'coco')!r}, workers=1))"
    )
    result = subprocess.run([sys.executable, "-c", rerun], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "SettingsMismatchError: cannot resume the bbob-noisy runs in" in result.stderr  # a ValueError
    assert "seed: stored 0, now 1" in result.stderr and "pass another result_folder" in result.stderr
    assert len(read_index(tmp_path / "coco")) == 1  # nothing was run
    run_coco(_config(tmp_path, functions=[101, 125]))  # the same seed resumes, with another function


def test_each_problem_has_its_own_stream_and_every_method_on_it_the_same(tmp_path, monkeypatch):
    streams, solve = [], coco.solve

    def recording(method, problem, x0, budget, lower, upper, seed, popsize):
        streams.append((method, seed))
        return solve(method, problem, x0, budget, lower, upper, seed, popsize)

    monkeypatch.setattr(coco, "solve", recording)
    with ThreadPoolExecutor(1) as pool:  # in this process, where the recording is
        run_coco(_config(tmp_path, methods=["rb_pem", "sep_cma"], functions=[101, 125], instances=[1, 2]), pool)
    by_method = {name: sorted(seed for method, seed in streams if method == name) for name in ("rb_pem", "sep_cma")}
    assert by_method["rb_pem"] == by_method["sep_cma"]  # paired on each problem
    assert len(set(by_method["rb_pem"])) == 4  # independent across problems


def test_a_folder_made_with_one_stream_for_every_problem_is_refused(tmp_path):
    (tmp_path / "coco" / "exdata").mkdir(parents=True)
    (tmp_path / "coco" / SETTINGS).write_text(json.dumps({"seed": 0}))
    with pytest.raises(ValueError, match="seeding"):
        run_coco(_config(tmp_path))


@pytest.fixture(scope="module")
def two_methods(tmp_path_factory):
    """A tiny run of two methods, two functions and two instances (one second), and its records."""
    folder = tmp_path_factory.mktemp("coco")
    config = CocoConfig(
        methods=["rb_pem", "sep_cma"],
        functions=[101, 125],
        instances=[1, 2],
        dimension=2,
        budget_multipliers=[20],
        result_folder=str(folder),
        workers=1,
    )
    return folder, run_coco(config)


def _cocopp_load(folder):
    with warnings.catch_warnings():  # cocopp warns that it cannot reach its online archive, and about < 15 instances
        warnings.simplefilter("ignore")
        import cocopp

        return cocopp.load(str(folder))


def test_cocopp_reads_one_algorithm_per_method_and_budget(two_methods):
    pytest.importorskip("cocopp")
    folder, _ = two_methods
    assert [path.name for path in algorithm_folders(folder)] == ["rb_pem_20D", "sep_cma_20D"]
    for path in algorithm_folders(folder):
        datasets = _cocopp_load(path)
        assert sorted((d.algId, d.funcId, d.dim) for d in datasets) == [(path.name, 101, 2), (path.name, 125, 2)]
        assert all(d.nbRuns() == 2 and sorted(d.instancenumbers) == [1, 2] for d in datasets)


def test_the_ecdf_agrees_with_cocopp_at_every_budget(two_methods):
    pytest.importorskip("cocopp")
    folder, records = two_methods
    grid = np.array([1, 5, 10, 20, 40])
    for method in ("rb_pem", "sep_cma"):
        ours = ecdf([r for r in records if r["method"] == method], grid)[method, 20]
        evaluations = np.concatenate(
            [np.array(d.detEvals(list(TARGETS))) for d in _cocopp_load(folder / "exdata" / f"{method}_20D")], axis=1
        )  # targets x (function, instance) runs; NaN: not reached
        reached = np.nan_to_num(evaluations, nan=np.inf)[None] <= grid[:, None, None]
        np.testing.assert_array_equal(ours, reached.mean(axis=(1, 2)))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dimension": 7}, r"`dimension` must be one of \[2, 3, 5, 10, 20, 40\]"),
        ({"budget_multipliers": [0]}, "`budget_multipliers` must be a non-empty list of integers >= 1"),
        ({"budget_multipliers": [-5]}, "`budget_multipliers`"),
        ({"functions": [1]}, r"`functions` must be a non-empty list from 101..130"),
        ({"methods": ["nevergrad"]}, "`methods` must be a non-empty list from"),
        ({"popsize": 1}, "`popsize` must be an integer >= 2 or None \\(CMA-ES's default\\), got 1"),
        ({"max_reevaluations": -1}, "`max_reevaluations` must be None \\(the default\\) or an integer >= 0, got -1"),
        ({"methods": ["unbiased_pem"], "max_reevaluations": 13}, "`max_reevaluations` must be <= 12 with weights="),
    ],
)
def test_refuses_bad_settings(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        _config(tmp_path, **fields)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        # a scalar for a list: 'int' object is not iterable, naming nothing (a YAML's `instances: 1`)
        ({"functions": 101}, TypeError, r"`functions` must be a list \(\[101\] for one\), got 101 \(int\)"),
        ({"instances": 1}, TypeError, r"`instances` must be a list \(\[1\] for one\), got 1 \(int\)"),
        ({"budget_multipliers": 100}, TypeError, r"`budget_multipliers` must be a list"),
        ({"methods": "rb_pem"}, TypeError, r"`methods` must be a list \(\['rb_pem'\] for one\), got 'rb_pem'"),
        # an element of another type that compares equal: taken, instance 1.0 and budget True * D
        ({"instances": [1.0]}, TypeError, r"`instances\[0\]` must be an integer, got 1.0 \(float\)"),
        ({"instances": [1, True]}, TypeError, r"`instances\[1\]` must be an integer, got True \(bool\)"),
        ({"budget_multipliers": [True]}, TypeError, r"`budget_multipliers\[0\]` must be an integer, got True"),
        # numpy's SeedSequence refuses it only once the runs start
        ({"seed": -1}, ValueError, "`seed` must be an integer >= 0, got -1"),
    ],
)
def test_refuses_a_scalar_for_a_list_an_element_of_another_type_and_a_negative_seed(tmp_path, fields, error, message):
    with pytest.raises(error, match=f"^CocoConfig: {message}"):
        _config(tmp_path, **fields)


def test_a_tuple_is_a_list():
    assert CocoConfig(instances=(1, 2)).instances == (1, 2)


@pytest.mark.parametrize(("dimension", "instance"), [(2, 1), (3, 7)])
def test_noise_free_values_are_those_coco_logs(tmp_path, dimension, instance):
    # cocoex returns noisy values only; its observer logs the noise-free value of each logged evaluation
    # (the .tdat file's fourth column, all of the first 8 evaluations), which ours must equal on every function
    import cocoex

    rng = np.random.default_rng(0)
    suite = cocoex.Suite("bbob-noisy", "", "")
    for function in range(101, 131):
        problem = suite.get_problem_by_function_dimension_instance(function, dimension, instance)
        observer = cocoex.Observer(
            "bbob-noisy", f"result_folder: f{function} outer_folder: {tmp_path} algorithm_name: check"
        )
        problem.observe_with(observer)
        points = rng.uniform(-4.9, 4.9, (8, dimension))
        for x in points:
            problem(x)
        problem.free()
        del observer
        (tdat,) = (tmp_path / f"f{function}").rglob("*.tdat")
        rows = [line.split() for line in tdat.read_text().splitlines() if not line.startswith("%")]
        logged = np.array([float(row[3]) for row in rows[:8]])
        np.testing.assert_allclose(noise_free_values(function, instance, points), logged, rtol=1e-9)


def test_runs_record_the_misranking_of_each_generation(tmp_path):
    (record,) = run_coco(_config(tmp_path, functions=[107], budget_multipliers=[30]))
    misranking = record["misranking"]
    assert len(misranking) == 60 // default_popsize(2) == 10
    assert all(0 <= value <= 1 for value in misranking)
    assert max(misranking) > 0  # f107's severe noise misranks some pairs


def test_a_population_size_sets_the_generations_and_is_kept_with_the_seed(tmp_path):
    (record,) = run_coco(_config(tmp_path, methods=["sep_cma"], functions=[107], budget_multipliers=[30], popsize=12))
    assert len(record["misranking"]) == 60 // 12
    with pytest.raises(ValueError, match="popsize: stored 12, now"):
        run_coco(_config(tmp_path, methods=["sep_cma"], functions=[107], budget_multipliers=[30]))


def test_the_reevaluation_cap_reaches_the_pem_methods_and_is_kept_with_the_seed(tmp_path):
    # With no re-evaluations UnbiasedPEM averages one ranking, the hard one: the plain ES's run to the last digit.
    fields = {"functions": [107], "budget_multipliers": [30]}
    plain, pem = run_coco(_config(tmp_path, methods=["sep_cma", "unbiased_pem"], max_reevaluations=0, **fields))
    assert pem["trajectory"] == plain["trajectory"] and pem["final"] == plain["final"]
    (default,) = run_coco(_config(tmp_path / "default", methods=["unbiased_pem"], **fields))
    assert default["trajectory"] != pem["trajectory"]  # two re-evaluations a generation change the run
    with pytest.raises(ValueError, match="max_reevaluations: stored 0, now"):
        run_coco(_config(tmp_path, methods=["sep_cma"], max_reevaluations=4, **fields))
