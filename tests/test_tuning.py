"""policy="auto" on a GPU: the measured table, and the fallback to XLA's ops."""
import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import pytest

import cusync_jax as cs
from cusync_jax import tuning

from helpers import rel_err

SHAPE = dict(hidden=1024, ffn=512, out=1024, activation="gelu")


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A tuned table for a made-up device "t100" (the H200's SM count)."""
    def entry(tokens, dtype, impl, policy=None, mode="xla", tile=None, speedup=0.9, order=None,
              **more):
        return dict(SHAPE, dtype=dtype, tokens=tokens, impl=impl, policy=policy, mode=mode,
                    tile=tile, speedup_over_xla=speedup, order=order, **more)
    entries = [entry(256, "float16", "xla"),
               entry(1024, "float16", "RowSync-fused@column_major", "RowSync", "fused",
                     [128, 256, 64], 1.2, "column_major"),
               entry(1024, "bfloat16", "serial", "RowSync", "serial", [128, 128, 64], 1.05),
               entry(2048, "float16", "RowSync-fused@cluster=2", "RowSync", "fused", [128, 128, 64],
                     1.1, "grouped", cluster_m=2)]
    (tmp_path / "t100-mlp.json").write_text(json.dumps({"entries": entries}))
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path)
    monkeypatch.delenv(tuning.TUNED_DIR_ENV, raising=False)
    tuning._read_table.cache_clear()
    yield cs.DeviceModel("NVIDIA T100", 132, arch=90)
    tuning._read_table.cache_clear()


def test_device_names_map_to_one_table():
    assert tuning.device_slug("NVIDIA H200") == tuning.device_slug("H200") == "h200"


def test_measured_winner_is_planned(table):
    rep = cs.plan_mlp(1024, 1024, 512, device=table, dtype=jnp.float16)
    assert rep.source == "measured" and not rep.fallback
    assert rep.policy == cs.RowSync() and rep.mode == "fused"
    assert rep.plan.tile1 == cs.TileShape(128, 256, 64)
    assert rep.plan.order1 == rep.plan.order2 == "column_major"
    # The nearest measured token count stands in, within a factor of 1.5.
    assert cs.plan_mlp(1300, 1024, 512, device=table, dtype="float16").mode == "fused"
    assert cs.plan_mlp(1024, 1024, 512, device=table, dtype="bfloat16").mode == "serial"
    # A measured cluster winner is planned with its cluster (entries written
    # before clusters existed run without one).
    rep = cs.plan_mlp(2048, 1024, 512, device=table, dtype="float16")
    assert rep.source == "measured" and rep.plan.cluster_m == 2 and rep.mode == "fused"
    assert rep.plan.attributes(0)["cluster_m"] == 2
    assert cs.plan_mlp(1024, 1024, 512, device=table, dtype="float16").plan.cluster_m == 1


def test_measured_loss_falls_back_to_xla(table):
    rep = cs.plan_mlp(256, 1024, 512, device=table, dtype="float16")
    assert rep.fallback and rep.source == "measured"
    # Explicit choices are the user's and are never replaced.
    rep = cs.plan_mlp(256, 1024, 512, device=table, dtype="float16", policy="rowsync")
    assert not rep.fallback and rep.source == "user"
    assert not cs.plan_mlp(256, 1024, 512, device=table, dtype="float16", mode="fused").fallback
    assert not cs.plan_mlp(256, 1024, 512, device=table, dtype="float16",
                           allow_fallback=False).fallback


def test_unmeasured_shapes_use_the_model_at_the_kernels_rate(table):
    # 4096 tokens is outside every measured count's reach: the wave model
    # decides. In stream order our kernels run at their measured fraction of
    # XLA's rate, so nothing saved means XLA wins.
    rep = cs.plan_mlp(4096, 1024, 512, device=table, dtype="float16")
    assert rep.source == "model"
    assert rep.fallback == (rep.mode == "serial" or rep.makespan_synced / 0.85 > rep.makespan_stream)
    # The CPU executor never falls back: it exists to run the policies.
    assert not cs.plan_mlp(256, 1024, 512, device="cpu").fallback


def test_fallback_plan_computes_plain_jnp():
    ks = jax.random.split(jax.random.key(0), 5)
    x = jax.random.normal(ks[0], (3, 5, 64))
    w1 = jax.random.normal(ks[1], (64, 96)) / 8
    w2 = jax.random.normal(ks[2], (96, 40)) / 10
    b1, b2 = jax.random.normal(ks[3], (96,)), jax.random.normal(ks[4], (40,))
    plan = cs.plan_mlp(15, 64, 96, 40, device="cpu").plan
    fallback = dataclasses.replace(plan, fallback=True)
    call = lambda x: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, plan=fallback)  # noqa: E731
    assert "cusync_synced_mlp" not in str(jax.make_jaxpr(call)(x))  # XLA's ops, not the kernels
    got = jax.jit(call)(x)
    want = cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, precision=None)
    assert rel_err(got, want) < 1e-6
    # Gradients flow through the plain ops.
    g = jax.grad(lambda w1: cs.synced_mlp(x, w1, w2, plan=fallback).sum())(w1)
    g_ref = jax.grad(lambda w1: cs.mlp_reference(x, w1, w2, precision=None).sum())(w1)
    assert rel_err(g, g_ref) < 1e-6


def test_committed_h200_table_is_well_formed():
    entries = tuning._table("h200")
    assert entries, "cusync_jax/tuned/h200-mlp.json is missing"
    for e in entries:
        choice = tuning._choice(e)
        assert choice.fallback == (choice.mode == "xla")
        if not choice.fallback:
            assert choice.policy is not None and choice.tile is not None
            assert choice.speedup_over_xla >= 1.0


def test_a_users_tuned_dir_replaces_the_shipped_table_of_its_device_only(tmp_path, monkeypatch):
    # The user's directory has an H200 MLP table whose one case (SHAPE at 1024
    # tokens, f16) runs fused RowSync; the shipped tables stay for the H100
    # and for the H200's conv pairs.
    own = tmp_path / "own"
    own.mkdir()
    entry = dict(SHAPE, dtype="float16", tokens=1024, impl="RowSync-fused", policy="RowSync", mode="fused",
                 tile=[128, 128, 64], speedup_over_xla=1.2, order="grouped")
    (own / "h200-mlp.json").write_text(json.dumps({"entries": [entry]}))
    monkeypatch.setenv(tuning.TUNED_DIR_ENV, str(own))
    tuning._read_table.cache_clear()
    try:
        rep = cs.plan_mlp(1024, 1024, 512, device="h200", dtype="float16")
        assert rep.source == "measured" and rep.mode == "fused" and rep.policy == cs.RowSync()
        assert tuning.table_path("h200") == own / "h200-mlp.json"
        source = tuning.table_source("NVIDIA H200")
        assert source["path"] == str(own / "h200-mlp.json") and not source["shipped"]
        assert len(source["sha256"]) == 16
        assert tuning.table_path("h100") == tuning.TABLE_DIR / "h100-mlp.json"
        assert tuning.table_source("NVIDIA H100 80GB HBM3")["shipped"]
        assert tuning.table_path("h200", "conv") == tuning.TABLE_DIR / "h200-conv.json"
        assert tuning.table_source("NVIDIA T100") is None  # no table anywhere
        monkeypatch.delenv(tuning.TUNED_DIR_ENV)
        assert tuning.table_source("NVIDIA H200")["shipped"]
    finally:
        tuning._read_table.cache_clear()


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_tuned_dir_that_is_not_a_directory_is_refused(tmp_path, monkeypatch, kind):
    bad = tmp_path / "tables"
    if kind == "a file":
        bad.write_text("")
    monkeypatch.setenv(tuning.TUNED_DIR_ENV, str(bad))
    with pytest.raises(ValueError, match="CUSYNC_JAX_TUNED_DIR=.*not a directory"):
        cs.plan_mlp(1024, 1024, 512, device="h200", dtype="float16")


def test_conv_pairs_fall_back_where_the_kernel_rate_cannot_win():
    # A pair the table has not measured (30x30): the conv kernel's measured
    # rate (0.3 of cuDNN) loses in the wave model.
    rep = cs.plan_conv_pair(8, 30, 30, 64, 64, device="h200")
    assert rep.fallback and rep.source == "model"
    assert not cs.plan_conv_pair(8, 30, 30, 64, 64, device="h200", allow_fallback=False).fallback
    rep = cs.plan_conv_pair(8, 30, 30, 64, 64, device="h200", mode="fused")
    assert not rep.fallback and rep.source == "user"
    assert not cs.plan_conv_pair(8, 30, 30, 64, 64, device="cpu").fallback


@pytest.fixture
def conv_table(tmp_path, monkeypatch):
    """A conv tuned table for the made-up device "t100"."""
    def entry(batch, size, c, impl, policy=None, mode="xla", tile=None, split_k=(1, 1), dtype="float16"):
        return dict(layer=f"l{size}", height=size, width=size, channels=[c, c, c], filters=[[3, 3], [3, 3]],
                    activation="relu", dtype=dtype, batch=batch, impl=impl, policy=policy, mode=mode,
                    tile=tile and [tile, tile], split_k=list(split_k), speedup_over_xla=1.2)
    entries = [entry(1, 56, 64, "sm90-RowSync-fused", "RowSync", "fused", [128, 64, 64]),
               entry(1, 28, 128, "sm90-serial@split", "Conv2DTileSync", "serial", [128, 128, 64], (3, 3)),
               entry(8, 56, 64, "xla"),
               entry(32, 56, 64, "RowSync-fused@split", "RowSync", "fused", None, (2, 1))]
    (tmp_path / "t100-conv.json").write_text(json.dumps({"entries": entries}))
    # With a residual add (ResNet's blocks) the 56x56x64 pair at batch 1 measured a loss.
    (tmp_path / "t100-conv-residual.json").write_text(json.dumps({"entries": [entry(1, 56, 64, "xla")]}))
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path)
    tuning._read_table.cache_clear()
    yield cs.DeviceModel("NVIDIA T100", 132, arch=90)
    tuning._read_table.cache_clear()


def test_conv_measured_winners_are_planned(conv_table):
    rep = cs.plan_conv_pair(1, 56, 56, 64, 64, device=conv_table)
    assert rep.source == "measured" and not rep.fallback
    assert (rep.plan.kernel, rep.plan.tile1, rep.plan.mode, rep.policy) == (
        1, cs.TileShape(128, 64, 64), "fused", cs.RowSync())
    rep = cs.plan_conv_pair(1, 28, 28, 128, 128, device=conv_table, dtype=jnp.float16)
    assert (rep.plan.kernel, rep.plan.mode, rep.plan.split_k, rep.policy) == (
        1, "serial", (3, 3), cs.Conv2DTileSync(3, 3))
    # A winner on the CUDA conv kernel: the planner's tile, the measured split.
    rep = cs.plan_conv_pair(32, 56, 56, 64, 64, device=conv_table)
    assert (rep.plan.kernel, rep.plan.mode, rep.plan.split_k) == (0, "fused", (2, 1))
    # A measured loss falls back; batches beyond 1.5x of a measured one, other
    # dtypes, filters or explicit choices are not the table's.
    rep = cs.plan_conv_pair(8, 56, 56, 64, 64, device=conv_table)
    assert rep.fallback and rep.source == "measured"
    # A pair with a residual add reads its own table: a loss there, none measured at 28x28.
    rep = cs.plan_conv_pair(1, 56, 56, 64, 64, device=conv_table, residual=True)
    assert rep.fallback and rep.source == "measured"
    assert cs.plan_conv_pair(1, 28, 28, 128, 128, device=conv_table, residual=True).source == "model"
    assert cs.plan_conv_pair(2, 56, 56, 64, 64, device=conv_table).source == "model"
    assert cs.plan_conv_pair(1, 56, 56, 64, 64, device=conv_table, dtype="bfloat16").source == "model"
    assert cs.plan_conv_pair(1, 56, 56, 64, 64, filter2=1, device=conv_table).source == "model"
    assert cs.plan_conv_pair(1, 56, 56, 64, 64, device=conv_table, mode="serial").source == "user"
    # The GPU kernels take float16 and bfloat16: auto runs XLA's convolutions for float32.
    rep = cs.plan_conv_pair(1, 56, 56, 64, 64, device=conv_table, dtype=jnp.float32)
    assert rep.fallback and rep.source == "model"


@pytest.mark.parametrize("residual", [False, True])
def test_committed_h200_conv_table_plans_what_it_measured(residual):
    name = "conv-residual" if residual else "conv"
    entries = tuning._table("h200", name)
    assert entries, f"cusync_jax/tuned/h200-{name}.json is missing"
    for e in entries:
        c0, c1, c2 = e["channels"]
        rep = cs.plan_conv_pair(e["batch"], e["height"], e["width"], c0, c1, c2, device="h200",
                                dtype=e["dtype"], residual=residual)
        assert rep.source == "measured" and rep.fallback == (e["impl"] == "xla"), e["layer"]
        if not rep.fallback:
            assert e["speedup_over_xla"] >= 1.0
            assert (rep.plan.mode, list(rep.plan.split_k)) == (e["mode"], e["split_k"])
            kernel = 1 if e["impl"].startswith("sm90-") else 2 if e["impl"].startswith("halo-") else 0
            assert rep.plan.kernel == kernel


def test_conv_fallback_plan_computes_lax_conv():
    ks = jax.random.split(jax.random.key(1), 4)
    x = jax.random.normal(ks[0], (2, 7, 7, 16))
    k1 = jax.random.normal(ks[1], (3, 3, 16, 24)) / 12
    k2 = jax.random.normal(ks[2], (3, 3, 24, 16)) / 15
    res = jax.random.normal(ks[3], (2, 7, 7, 16))
    plan = dataclasses.replace(cs.plan_conv_pair(2, 7, 7, 16, 24, 16, device="cpu").plan,
                               fallback=True)
    call = lambda x: cs.synced_conv_pair(x, k1, k2, residual=res, plan=plan)  # noqa: E731
    assert "cusync_synced_conv_pair" not in str(jax.make_jaxpr(call)(x))
    got = call(x)
    want = cs.conv_pair_reference(x, k1, k2, residual=res, precision=None)
    assert rel_err(got, want) < 1e-6


def test_tile_order_is_a_choice_of_both_gemms():
    rep = cs.plan_mlp(512, 256, 512, device="cpu", order="column_major")
    assert rep.plan.order1 == rep.plan.order2 == "column_major" and rep.source == "user"
    with pytest.raises(ValueError, match="order: expected None or one of"):
        cs.plan_mlp(512, 256, 512, device="cpu", order="diagonal")


def load_bench_tune():
    """bench/tune.py as a module (it imports its neighbours in bench/)."""
    import importlib.util
    import pathlib
    import sys
    bench = pathlib.Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location("bench_tune", bench / "tune.py")
        tune = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tune)
    finally:
        sys.path.remove(str(bench))
    return tune


def test_bench_tune_picks_the_fastest_and_falls_back_within_the_margin(tmp_path):
    tune = load_bench_tune()

    def row(tokens, impl, ms, plan=None):
        r = dict(SHAPE, model="custom", dtype="float16", tokens=tokens, impl=impl, ms=ms)
        return dict(r, plan=plan) if plan else r
    rows = [row(512, "xla", 1.00), row(512, "serial", 0.95, "128x128x64 RowSync serial grouped"),
            row(512, "RowSync-fused", 0.90, "128x128x64 RowSync fused grouped:2"),
            row(512, "auto", 0.80, "xla (fallback)"),  # auto never chooses itself
            row(2048, "xla", 1.00), row(2048, "serial", 0.995, "128x128x64 RowSync serial"),
            # Ahead on medians, behind round by round: a lucky median.
            row(3072, "xla", 1.00), dict(row(3072, "serial", 0.97, "128x128x64 RowSync serial"),
                                         over_xla_paired=0.99),
            # A launch option the table cannot replay is no candidate.
            row(4096, "xla", 1.00), row(4096, "serial@overlap=1", 0.90, "128x128x64 RowSync serial grouped overlap")]
    result = {"device": "NVIDIA T100", "commit": "abc", "dirty": False, "date": "d", "rows": rows}
    path = tmp_path / "t100-mlp.json"
    path.write_text(json.dumps(result))
    tune.main([str(path), "--out-dir", str(tmp_path / "tuned")])
    entries = json.loads((tmp_path / "tuned" / "t100-mlp.json").read_text())["entries"]
    win, near, lucky, option = entries
    assert (win["impl"], win["policy"], win["mode"], win["order"], win["group_rows"]) == (
        "RowSync-fused", "RowSync", "fused", "grouped", 2)
    assert win["tile"] == [128, 128, 64] and win["speedup_over_xla"] == round(1 / 0.9, 3)
    # 0.5 % faster than XLA is noise: XLA's ops stay.
    assert near["impl"] == "xla" and near["mode"] == "xla"
    assert lucky["impl"] == "xla" and option["impl"] == "xla"
    # A plan written before orders were printed ran row-major.
    assert tune.parse_plan("128x256x64 TileSync fused")[3] == "row_major"
    assert tune.parse_plan("128x128x64 cluster 2x1 RowSync fused grouped") == (
        [128, 128, 64], "RowSync", "fused", "grouped", 8, 2, [False, False], "auto")
    assert tune.parse_plan("128x128x64 RowSync serial grouped stream-K 1 mma=cooperative")[6:] == (
        [True, False], "cooperative")
    assert tune.parse_plan("128x128x64 RowSync fused")[5] == 1
    assert tune.parse_plan("128x128x64 RowSync serial grouped stream-K 1/2")[2:7] == (
        "serial", "grouped", 8, 1, [True, True])
    assert tune.parse_plan("128x128x64 RowSync serial grouped stream-K 2")[6] == [False, True]
    assert tune.parse_plan("128x128x64/128x192x64 RowSync serial grouped")[0] == [[128, 128, 64],
                                                                                 [128, 192, 64]]


def test_bench_tune_merges_mlp_runs_at_each_side_best(tmp_path):
    tune = load_bench_tune()

    def run(name, cases):
        rows = [dict(SHAPE, model="custom", dtype="float16", tokens=tokens, impl=impl, ms=ms,
                     **({"plan": "128x128x64 RowSync fused grouped"} if impl != "xla" else {}))
                for tokens, impl, ms in cases]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": "NVIDIA T100", "commit": name, "dirty": False, "date": "d",
                                    "rows": rows}))
        return str(path)
    # 4096 tokens: a win in run a where XLA ran slow (1.10 / 1.05), a loss in
    # the repeat b; at each side's best (1.00 / 1.03) it falls back. 512: a
    # win in both runs, against XLA's best (1.00 / 0.90).
    a = run("a", [(4096, "xla", 1.10), (4096, "RowSync-fused", 1.05), (512, "xla", 1.00),
                  (512, "RowSync-fused", 0.92)])
    b = run("b", [(4096, "xla", 1.00), (4096, "RowSync-fused", 1.03), (512, "xla", 1.02),
                  (512, "RowSync-fused", 0.90)])
    tune.main([a, b, "--out-dir", str(tmp_path / "tuned")])
    table = json.loads((tmp_path / "tuned" / "t100-mlp.json").read_text())
    assert table["measured_commit"] == ["a", "b"]
    small, large = table["entries"]
    assert (small["tokens"], small["impl"], small["speedup_over_xla"]) == (512, "RowSync-fused", round(1 / 0.9, 3))
    assert (large["tokens"], large["impl"], large["speedup_over_xla"]) == (4096, "xla", round(1 / 1.03, 3))


def test_bench_tune_never_picks_an_implementation_its_check_found_wrong(tmp_path):
    tune = load_bench_tune()
    plan = "128x128x64 RowSync fused grouped"

    def row(tokens, impl, ms, **extra):
        return dict(SHAPE, model="custom", dtype="float16", tokens=tokens, impl=impl, ms=ms,
                    **({"plan": plan} if impl != "xla" else {}), **extra)
    # RowSync-fused was checked at 512 tokens (the bench checks a model's first
    # token count) and was wrong: fastest at both sizes, picked at neither;
    # serial's check passed within float16's tolerance, and serial wins both.
    rows = [row(512, "xla", 1.00, rel_err=0.0), row(512, "RowSync-fused", 0.50, rel_err=0.9),
            row(512, "serial", 0.80, rel_err=0.004), row(2048, "xla", 1.00), row(2048, "RowSync-fused", 0.50),
            row(2048, "serial", 0.97)]
    path = tmp_path / "t100-mlp.json"
    path.write_text(json.dumps({"device": "NVIDIA T100", "commit": "abc", "dirty": False, "date": "d",
                                "rows": rows}))
    tune.main([str(path), "--out-dir", str(tmp_path / "tuned")])
    small, large = json.loads((tmp_path / "tuned" / "t100-mlp.json").read_text())["entries"]
    assert (small["impl"], small["speedup_over_xla"]) == ("serial", round(1 / 0.8, 3))
    assert (large["impl"], large["speedup_over_xla"]) == ("serial", round(1 / 0.97, 3))


def test_bench_check_measures_each_row_against_the_reference():
    checks = load_bench_tune().checks  # bench/checks.py, as tune.py imports it
    x = jnp.arange(1.0, 9.0, dtype=jnp.float16)
    errs = checks.check({"xla": lambda a: a * 2, "good": lambda a: a + a, "off": lambda a: a * 2 + 1,
                         "nan": lambda a: a / 0 * 0}, (x,))
    assert errs["xla"] == 0.0 and errs["good"] == 0.0
    assert errs["off"] == pytest.approx(1 / 16) and errs["nan"] == float("inf")
    assert not checks.is_wrong(dict(dtype="float16", rel_err=errs["good"]))
    assert checks.is_wrong(dict(dtype="float16", rel_err=errs["off"]))
    assert checks.is_wrong(dict(dtype="bfloat16", rel_err=errs["nan"]))
    assert not checks.is_wrong(dict(dtype="float16"))  # unchecked rows stand


def test_float32_on_a_gpu_runs_xla_under_auto(table):
    # The GPU kernels take float16 and bfloat16: auto never plans them for float32.
    assert cs.plan_mlp(1024, 1024, 512, device=table, dtype=jnp.float32).fallback
    assert cs.plan_mlp(1024, 1024, 512, device="cpu", dtype=jnp.float32).fallback is False


def test_a_table_entry_may_name_a_tile_per_gemm():
    entry = dict(impl="serial", tokens=256, policy="RowSync", mode="serial",
                 tile=[[128, 128, 64], [128, 192, 64]], speedup_over_xla=1.02, order="grouped")
    choice = tuning._choice(entry)
    assert choice.tile == (cs.TileShape(128, 128, 64), cs.TileShape(128, 192, 64))
    plan = cs.plan_mlp(256, 12288, 6144, device="h200", tile=choice.tile, policy=choice.policy,
                       mode=choice.mode, order=choice.order).plan
    assert (plan.tile1.n, plan.tile2.n) == (128, 192)


def test_a_table_entry_may_name_the_mma_schedule():
    entry = dict(impl="RowSync-fused", tokens=256, policy="RowSync", mode="fused", tile=[128, 128, 64],
                 speedup_over_xla=1.02, order="grouped", mma_schedule="cooperative")
    choice = tuning._choice(entry)
    assert choice.mma_schedule == "cooperative"
    # Tables written before the schedule was a choice ran the rule.
    older = {k: v for k, v in entry.items() if k != "mma_schedule"}
    assert tuning._choice(older).mma_schedule == "auto"


def test_bench_tune_merges_conv_runs_at_each_side_best(tmp_path):
    tune = load_bench_tune()

    def run(name, rows, timing="device"):
        result = {"device": "NVIDIA T100", "commit": name, "dirty": False, "date": "d",
                  "rows": [dict(layer=layer, dtype="float16", batch=batch, impl=impl, ms=ms)
                           for layer, batch, impl, ms in rows]}
        if timing:
            result["timing"] = timing
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(result))
        return str(path)
    # Run a: the plain rows; run b, another day, where XLA ran slower: the
    # split Hopper rows. Each side counts at its shortest time over both runs.
    # Run c timed the wall time of its loops (and d did not say, as results
    # before --timing): neither is judged, and its cases fall back.
    a = run("a", [("resnet-7x7x512", 1, "xla", 1.0), ("resnet-7x7x512", 1, "sm90-serial", 1.2),
                  ("resnet-7x7x512", 1, "auto", 0.5), ("resnet-28x28x128", 1, "xla", 1.0),
                  ("resnet-28x28x128", 1, "sm90-RowSync-fused", 1.05),
                  ("resnet-14x14x256", 1, "xla", 1.0), ("resnet-14x14x256", 1, "sm90-serial", 1.1)])
    b = run("b", [("resnet-7x7x512", 1, "xla", 1.3), ("resnet-7x7x512", 1, "sm90-serial@split", 0.95),
                  ("resnet-28x28x128", 1, "xla", 1.4), ("resnet-28x28x128", 1, "sm90-serial@split", 1.1),
                  ("resnet-14x14x256", 1, "xla", 1.1),
                  ("resnet-14x14x256", 1, "sm90-serial@n64,split=12x12", 0.8)])
    c = run("c", [("resnet-7x7x512", 1, "xla", 0.5), ("resnet-7x7x512", 1, "sm90-serial", 0.1),
                  ("vgg19-14x14x512", 1, "xla", 1.0), ("vgg19-14x14x512", 1, "sm90-serial", 0.5)], timing="loop")
    d = run("d", [("vgg19-28x28x512", 1, "xla", 1.0), ("vgg19-28x28x512", 1, "sm90-serial", 0.5)], timing=None)
    tune.main([a, b, c, d, "--out-dir", str(tmp_path / "tuned")])
    table = json.loads((tmp_path / "tuned" / "t100-conv.json").read_text())
    assert table["measured_commit"] == ["a", "b", "c", "d"]
    assert table["measured_timing"] == ["device", "device", "loop", "loop"]
    by_layer = {e["layer"]: e for e in table["entries"]}
    # Against run a's XLA (1.0, its shortest), not run b's 1.3; auto's row never counts.
    # The split's shares come from bench/conv.py's rule.
    deep = by_layer["resnet-7x7x512"]
    assert (deep["impl"], deep["mode"], deep["tile"], deep["split_k"]) == (
        "sm90-serial@split", "serial", [[128, 128, 64], [128, 128, 64]], [8, 8])
    assert deep["speedup_over_xla"] == round(1.0 / 0.95, 3)
    # 1.4 / 1.1 within run b would be a win; at each side's best it is 1.0 / 1.05, XLA's.
    mid = by_layer["resnet-28x28x128"]
    assert (mid["impl"], mid["mode"], mid["split_k"]) == ("xla", "xla", [1, 1])
    assert mid["speedup_over_xla"] == round(1.0 / 1.05, 3)
    # A row with its own tile and shares keeps both.
    small = by_layer["resnet-14x14x256"]
    assert (small["impl"], small["tile"], small["split_k"]) == (
        "sm90-serial@n64,split=12x12", [[128, 64, 64], [128, 64, 64]], [12, 12])
    for layer in ("vgg19-14x14x512", "vgg19-28x28x512"):
        assert (by_layer[layer]["impl"], by_layer[layer]["speedup_over_xla"]) == ("xla", None)
    # Results with the residual add (bench/conv.py --residual) make their own
    # table, and do not mix with plain ones.
    e = run("e", [("resnet-56x56x64", 4, "xla", 1.0), ("resnet-56x56x64", 4, "halo-serial", 0.9)])
    residual = json.loads(pathlib.Path(e).read_text())
    residual["residual"] = True
    pathlib.Path(e).write_text(json.dumps(residual))
    tune.main([e, "--out-dir", str(tmp_path / "tuned")])
    table = json.loads((tmp_path / "tuned" / "t100-conv-residual.json").read_text())
    assert table["residual"] and [x["impl"] for x in table["entries"]] == ["halo-serial"]
    assert json.loads((tmp_path / "tuned" / "t100-conv.json").read_text())["measured_commit"] == ["a", "b", "c", "d"]
    with pytest.raises(SystemExit):
        tune.main([a, e, "--out-dir", str(tmp_path / "tuned")])
    # An MLP result does not merge with conv results.
    mlp = tmp_path / "t100-mlp.json"
    mlp.write_text(json.dumps({"device": "NVIDIA T100", "commit": "c", "dirty": False, "date": "d",
                               "rows": [dict(SHAPE, model="custom", dtype="float16", tokens=256, impl="xla",
                                             ms=1.0)]}))
    with pytest.raises(SystemExit):
        tune.main([a, str(mlp), "--out-dir", str(tmp_path / "tuned")])


def test_bench_conv_row_names_say_their_plan():
    conv = load_bench_tune().conv
    size, c0, c1, c2 = conv.LAYERS["resnet-7x7x512"]
    kw = lambda row, batch=1: conv.plan_kwargs(row, batch, size, c0, c1, c2)  # noqa: E731
    assert kw("xla") is None and kw("auto") == {}
    assert kw("sm90-serial") == dict(policy="Conv2DTileSync", mode="serial", tile=(128, 128, 64))
    # The rule's shares: 72 k-blocks, 4 tiles of 128x128 at batch 1 -> 8; 8 tiles of 128x64 -> 8 too.
    assert kw("sm90-serial@split")["split_k"] == (8, 8)
    assert kw("sm90-serial@n64,split") == dict(policy="Conv2DTileSync", mode="serial", tile=(128, 64, 64),
                                               split_k=(8, 8))
    # 32 tiles of 128x64 at batch 8 leave room for 4 shares of 18 k-blocks.
    assert kw("sm90-serial@n64,split", 8)["split_k"] == (4, 4)
    assert kw("sm90-RowSync-fused@n64,split=12x6")["split_k"] == (12, 6)
    assert kw("sm90-serial@") == kw("sm90-serial")  # no options: the plain row
    for bad in ("sm90-serial@n32", "serial@n64", "sm90-serial@split=3", "RowSync-sideways"):
        with pytest.raises(ValueError, match="unknown row"):
            kw(bad)
    # Rows that plan the same at a layer and batch are timed once.
    names = list(conv.distinct(conv.implementations(hopper=True), 1, *conv.LAYERS["resnet-56x56x64"]))
    assert "sm90-serial@split" in names and "sm90-serial@n64,split" not in names
    assert "sm90-serial@n64,split" in conv.distinct(conv.implementations(hopper=True), 1, size, c0, c1, c2)
    # An explicit split is the rule's at batch 1 (8 shares of 72 k-blocks) but not at 32 (2): timed there.
    extra = conv.implementations(hopper=True, extra=["sm90-serial@split=8x8"])
    assert "sm90-serial@split=8x8" not in conv.distinct(extra, 1, size, c0, c1, c2)
    assert kw("sm90-serial@split", 32)["split_k"] == (2, 2)
    assert "sm90-serial@split=8x8" in conv.distinct(extra, 32, size, c0, c1, c2)
