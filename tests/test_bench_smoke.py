"""The benchmark scripts run end to end on the CPU at tiny sizes and write
their results (their numbers mean nothing here: this only keeps the
scripts working between GPU runs)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


def run_bench(name, *args, env=None):
    out = subprocess.run([sys.executable, str(BENCH / name), *args], capture_output=True, text=True,
                         timeout=600, cwd=BENCH, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_mlp_bench(tmp_path):
    run_bench("mlp.py", "--hidden", "64", "--ffn", "64", "--tokens", "32", "--dtype", "float16",
              "--rounds", "1", "--variants", "grouped:2,tile=32x64x64", "--skip", "TileSync-streams",
              "--heat-s", "0.01", "--commit", "abc", "--dirty", "0",
              "--out-dir", str(tmp_path))
    result = json.loads((tmp_path / "cpu-mlp.json").read_text())
    impls = {r["impl"] for r in result["rows"]}
    assert {"xla", "serial", "RowSync-fused", "serial@grouped:2,tile=32x64x64", "auto"} <= impls
    assert "TileSync-streams" not in impls
    xla = next(r for r in result["rows"] if r["impl"] == "xla")
    assert xla["over_xla_paired"] == 1.0 and len(xla["rounds_ms"]) == 1
    plans = {r["impl"]: r.get("plan", "") for r in result["rows"]}
    assert plans["serial@grouped:2,tile=32x64x64"].startswith("32x64x64 ")
    assert result["commit"] == "abc" and result["dirty"] is False and result["heat_s"] == 0.01
    # Each row's output was checked against XLA's before timing (bench/checks.py).
    assert all(r["rel_err"] < 3e-2 for r in result["rows"])


def test_alternate_heats_each_variant_before_each_timed_launch():
    # bench/timing.py: with heat_s, every timed launch of a variant follows
    # that variant run back to back (its own steady state at the power cap).
    sys.path.insert(0, str(BENCH))
    try:
        import timing
    finally:
        sys.path.remove(str(BENCH))
    import jax.numpy as jnp
    calls = []

    def variant(name):
        def fn(x):
            calls.append(name)
            return x + 1
        return fn, (jnp.zeros(4),), 1

    timed = []
    timing.alternate({"a": variant("a"), "b": variant("b")}, rounds=2, warmup=0, heat_s=0.02,
                     measure=lambda fn, args: timed.append(len(calls)) or fn(*args) is None or 1.0)
    # Before each of the 4 timed launches, the same variant ran at least once more.
    assert len(timed) == 4
    starts = [0] + [t + 1 for t in timed[:-1]]
    for start, end in zip(starts, timed):
        heated = calls[start:end]
        assert heated and len(set(heated)) == 1
    assert timing.heat(variant("c")[0], (jnp.zeros(4),), 0.0) == 0


def test_conv_bench(tmp_path):
    out = tmp_path / "conv.json"
    run_bench("conv.py", "--layers", "resnet-7x7x512", "--batches", "1",  # reps: from a probe
              "--rounds", "1", "--residual", "--commit", "abc", "--dirty", "0", "--out", str(out))
    result = json.loads(out.read_text())
    assert {r["impl"] for r in result["rows"]} >= {"xla", "serial", "Conv2DTileSync-fused", "auto"}
    # The CPU is no Hopper GPU: no sm90 rows unless asked for.
    assert not any(r["impl"].startswith("sm90-") for r in result["rows"]) and result["residual"] is True
    assert result["timing"] == "loop"  # no GPU to be busy: wall time
    assert next(r for r in result["rows"] if r["impl"] == "auto")["fallback"] is False  # the CPU executor ran
    assert all(r["rel_err"] < 3e-2 for r in result["rows"])  # checked against XLA before timing



def test_conv_bench_times_an_rgb_layer_on_the_hopper_conv_unfolded():
    import importlib.util

    import cusync_jax as cs
    spec = importlib.util.spec_from_file_location("conv_bench", BENCH / "conv.py")
    sys.path.insert(0, str(BENCH))
    try:
        conv_bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(conv_bench)
    finally:
        sys.path.remove(str(BENCH))
    assert conv_bench.hopper_runs("vgg19-224x224x3-64")
    for row in ("sm90-serial@split", "sm90-RowSync-fused"):
        kw = conv_bench.plan_kwargs(row, 8, 224, 3, 64, 64)
        plan = cs.plan_conv_pair(8, 224, 224, 3, 64, 64, device="h200", **kw).plan
        # conv 1 runs as one k-block of a 1x1 conv: its split is 1 whatever the rule.
        assert plan.unfold1 and plan.kernel == 1 and plan.split_k[0] == 1

def test_device_time_counts_overlapping_work_once():
    sys.path.insert(0, str(BENCH))
    try:
        import device_time
    finally:
        sys.path.remove(str(BENCH))
    assert device_time.union_us([]) == 0.0
    # Two overlapping kernels (one started early), a gap, one nested inside another, a touching one.
    assert device_time.union_us([(0, 10), (5, 10), (30, 2), (40, 10), (42, 3), (50, 5)]) == 15 + 2 + 15
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="--timing loop"):
            device_time.busy_ms(lambda: None, ())

    # The profiler's own event list: GPU kernels, memsets and copies only, in us.
    class Event:
        def __init__(self, name, cat, start_ns, dur_ns):
            self._v = (name, cat, start_ns, dur_ns)
        def name(self): return self._v[0]  # noqa: E301,E704
        def activity_type(self): return self._v[1]  # noqa: E301,E704
        def start_ns(self): return self._v[2]  # noqa: E301,E704
        def duration_ns(self): return self._v[3]  # noqa: E301,E704

    class Profile:
        class profiler:  # noqa: N801
            class kineto_results:  # noqa: N801
                @staticmethod
                def events():
                    return [Event("k2", "kernel", 9000, 1000), Event("cudaLaunchKernel", "cuda_runtime", 0, 50),
                            Event("k1", "kernel", 2000, 3000), Event("memset", "gpu_memset", 500, 500)]
    events = device_time._kineto_events(Profile())
    assert [(e["name"], e["ts"], e["dur"]) for e in events] == [("memset", 0.5, 0.5), ("k1", 2.0, 3.0),
                                                                 ("k2", 9.0, 1.0)]
    assert device_time._kineto_events(object()) == []  # no such API: the exported trace instead


def test_model_bench(tmp_path):
    pytest.importorskip("flax")
    out = tmp_path / "model.json"
    run_bench("model.py", "--size", "small", "--tokens", "64", "--batch", "1", "--rounds", "1",
              "--out", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert {r["model"] for r in rows} == {"gpt3-layer", "resnet38"}
    assert all(r["fallback"] is False for r in rows)  # the CPU never falls back


def test_tp_bench(tmp_path):
    out = tmp_path / "tp.json"
    run_bench("tp.py", "--hidden", "64", "--ffn", "256", "--tokens", "256", "--chunks", "2",
              "--rounds", "1", "--out", str(out),
              env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    result = json.loads(out.read_text())
    assert result["gpus"] == 2
    assert {r["impl"] for r in result["rows"]} == {"xla", "synced", "xla-chunked2", "synced-chunked2"}


def test_gemm_bench_arguments():
    # The GEMM bench times the Hopper kernel only; here its arguments are
    # checked: default and given tile orders both arrive parsed.
    sys.path.insert(0, str(BENCH))
    try:
        import gemm as gemm_bench
    finally:
        sys.path.remove(str(BENCH))
    default = gemm_bench.parse_args([])
    assert [name for name, _ in default.orders] == ["grouped", "row_major"]
    assert all(isinstance(kw, dict) for _, kw in default.orders)
    given = gemm_bench.parse_args(["--orders", "grouped:16", "column_major"])
    assert [name for name, _ in given.orders] == ["grouped16", "column_major"]
    assert given.orders[0][1].get("group_rows") == 16


def test_mlp_bench_variant_takes_a_tile_per_gemm():
    sys.path.insert(0, str(BENCH))
    try:
        import mlp as mlp_bench
    finally:
        sys.path.remove(str(BENCH))
    import cusync_jax as cs
    kw = mlp_bench.order_kwargs("tile=128x96x64/128x192x64,grouped:4")
    assert kw["tile"] == (cs.TileShape(128, 96, 64), cs.TileShape(128, 192, 64))
    assert kw["order"] == "grouped" and kw["group_rows"] == 4
    assert mlp_bench.order_kwargs("tile=128x128x64")["tile"] == cs.TileShape(128, 128, 64)
    with pytest.raises(ValueError, match="one tile or two"):
        mlp_bench.order_kwargs("tile=128x96x64/128x192x64/128x128x64")
    plan = cs.plan_mlp(256, 12288, 6144, device="h200", mode="serial",
                       tile=kw["tile"]).plan
    assert mlp_bench.describe(plan).startswith("128x96x64/128x192x64 ")


def test_merge_results_joins_parts_of_one_measurement(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        import merge_results
    finally:
        sys.path.remove(str(BENCH))
    head = {"commit": "abc", "dirty": False, "device": "NVIDIA H200", "timing": "device"}
    a = {**head, "date": "2026-12-01T10:00:00+00:00",
         "rows": [{"layer": "l", "batch": 1, "impl": "xla", "ms": 1.0}]}
    b = {**head, "date": "2026-12-01T11:00:00+00:00",
         "rows": [{"layer": "l", "batch": 4, "impl": "xla", "ms": 2.0}]}
    for i, part in enumerate((a, b)):
        (tmp_path / f"{i}.json").write_text(json.dumps(part))
    out = tmp_path / "merged.json"
    run_bench("merge_results.py", str(out), str(tmp_path / "0.json"), str(tmp_path / "1.json"))
    merged = json.loads(out.read_text())
    assert [r["batch"] for r in merged["rows"]] == [1, 4]
    assert merged["date"] == b["date"] and merged["timing"] == "device" and merged["commit"] == "abc"
    with pytest.raises(ValueError, match="timing"):
        merge_results.merge([a, {**b, "timing": "loop"}])
    # A case's rows come from one run: xla in one part and ours in another is refused.
    ours = {**a, "rows": [{**a["rows"][0], "impl": "sm90-serial"}]}
    with pytest.raises(ValueError, match="part 1 and part 2"):
        merge_results.merge([a, ours])


def test_energy_joins_each_sustain_window_with_its_power_samples():
    # bench/energy.py: each variant's window (after its first SETTLE_S) gets
    # the mean clock and power of the nvidia-smi samples inside it, and the
    # energy of one GEMM is its median time x that power.
    sys.path.insert(0, str(BENCH))
    try:
        import energy
    finally:
        sys.path.remove(str(BENCH))
    sustain = [
        "== gemm_vs_cutlass 256 6144 12288\n",
        "own kernel: 128x128x64, 6 stages, 230400 bytes of shared memory\n",
        "sustain 256 6144 12288  own128_column          12:00:00.000-12:00:02.000  median 0.0800 ms  "
        "first 0.0700  last 0.0900  (100 batches)\n",
        "sustain 256 6144 12288  cutlass_pp128_c1       12:00:03.000-12:00:05.000  median 0.1000 ms  "
        "first 0.0900  last 0.1100  (80 batches)\n",
    ]
    smi = ["2026/12/02 12:00:00.200, 1980 MHz, 100.00 W, 40, 0x0000000000000000\n",  # settling: left out
           "2026/12/02 12:00:01.000, 1500 MHz, 600.00 W, 50, 0x0000000000000004\n",
           "2026/12/02 12:00:02.000, 1400 MHz, 700.00 W, 51, 0x0000000000000004\n",
           "not a sample\n",
           "2026/12/02 12:00:04.000, 1300 MHz, 650.00 W, 52, 0x0000000000000004\n"]
    rows = energy.join(energy.parse_sustain(sustain), energy.parse_smi(smi))
    assert [r["variant"] for r in rows] == ["own128_column", "cutlass_pp128_c1"]
    assert rows[0]["shape"] == [256, 6144, 12288] and rows[0]["section"] == "gemm_vs_cutlass 256 6144 12288"
    assert rows[0]["mhz"] == 1450 and rows[0]["watts"] == 650.0 and rows[0]["mj"] == 52.0
    assert rows[1]["mhz"] == 1300 and rows[1]["mj"] == 65.0 and rows[1]["throttle"] == ["0x0000000000000004"]
    # Logs of two different runs do not overlap: an error naming the variant.
    with pytest.raises(ValueError, match="own128_column"):
        energy.join(energy.parse_sustain(sustain[:3]), energy.parse_smi(smi[4:]))
    # cuBLAS's window, printed by bench/cublas_sustain.py (without torch here), joins the same way.
    sys.path.insert(0, str(BENCH))
    try:
        import cublas_sustain
    finally:
        sys.path.remove(str(BENCH))
    line = cublas_sustain.sustain_line(4096, 12288, 6144, "cublas_torch", "12:00:03.500", "12:00:05.000",
                                       [1.0, 0.9, 1.1])
    (row,) = energy.join(energy.parse_sustain([line]), energy.parse_smi(smi))
    assert row["variant"] == "cublas_torch" and row["shape"] == [4096, 12288, 6144]
    assert row["ms"] == 1.0 and row["mj"] == 650.0


def test_ncu_top_splits_stall_samples_at_its_marks(tmp_path):
    # bench/ncu_top.py reads ncu's source page (one CSV table per kernel):
    # each mark starts a region at its first match after the previous mark's.
    header = '"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_wait"'
    code = [("0x10", "LDC R1, c[0x0][0x28]", 2, 0, 2),
            ("0x20", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R7+URZ], R4", 1, 0, 1),
            ("0x30", "@!P0  BRA 0x100", 10, 10, 0),
            ("0x40", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R6+URZ], R5", 4, 4, 0),
            ("0x50", "HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspB, R24", 3, 0, 3),
            ("0x60", "STG.E desc[UR18][R18.64], R97", 5, 5, 0)]
    lines = ['"Kernel Name","void k()"', header] + [",".join(f'"{v}"' for v in row) for row in code]
    path = tmp_path / "k.csv"
    path.write_text("\n".join(lines) + "\n")
    sys.path.insert(0, str(BENCH))
    try:
        import ncu_top
    finally:
        sys.path.remove(str(BENCH))
    ((title, rows),) = ncu_top.tables(path.read_text().splitlines())
    assert "void k()" in title and len(rows) == 6
    col = "Warp Stall Sampling (All Samples)"
    marks = [("turn", "SYNCS.PHASECHK"), ("full", "SYNCS.PHASECHK"), ("mma", "HGMMA"), ("never", "NOSUCH")]
    assert ncu_top.regions(rows, col, marks) == [("start", 2), ("turn", 11), ("full", 4), ("mma", 8)]
    out = run_bench("ncu_top.py", str(path), "--top", "2", "--mark", "mma=HGMMA")
    assert "  mma                            8   32.0%" in out  # 8 of 25 samples
    assert " 40.00%" in out and "[long_sb 10]" in out


def test_ncu_sides_table_names_each_profiled_kernel_by_its_variant(tmp_path):
    # bench/ncu_sides.py reads ncu's metric lines (the format ncu prints per kernel)
    # and names each kernel by the harness's variant lines, in launch order.
    kernel = (" void chain_kernel_sm90<ChainConfig<half_t, 128, 0, 1, 0, 2, 1, 0, 0>>(ChainParams<T1>) "
              "(132, 1, 1)x(384, 1, 1), Context 1, Stream 13, Device 0, CC 9.0")
    metrics = [" gpu__time_duration.sum us 90.85", " sm__cycles_elapsed.max cycle 100,000",
               " sm__pipe_tensor_op_hmma_cycles_active.avg cycle 80,000", " lts__t_bytes.sum Mbyte 1,234.5"]
    lines = [kernel, *metrics, kernel, " gpu__time_duration.sum ms 1.25", " sm__cycles_elapsed.max cycle 160,000",
             metrics[2], " lts__t_bytes.sum Gbyte 2.5",
             "  4096   6144  12288  own128_grouped               0.9332 ms   663 TF/s  maxdiff 0",
             "  4096   6144  12288  own128_grouped~mma           0.7960 ms   777 TF/s  maxdiff 15.9"]
    (tmp_path / "metrics_4096x6144x12288.txt").write_text("\n".join(lines) + "\n")
    out = run_bench("ncu_sides.py", str(tmp_path))
    rows = [line.split() for line in out.splitlines() if line.startswith("  own")]
    assert [r[0] for r in rows] == ["own128_grouped", "own128_grouped~mma"]
    assert rows[0][1:5] == ["90.8", "100.0", "80.0", "1234.5"]  # us, kcycles, tensor %, L2 MB
    assert rows[1][1:5] == ["1250.0", "160.0", "50.0", "2500.0"]  # ncu's ms and Gbyte scaled



def test_mlp_bench_chains_weight_sets(tmp_path):
    # --weight-sets 2: each chained call runs two MLPs with their own weights.
    run_bench("mlp.py", "--hidden", "64", "--ffn", "64", "--tokens", "32", "--dtype", "float16",
              "--rounds", "1", "--weight-sets", "2",
              "--skip", "TileSync-streams", "TileSync-fused", "RowSync-streams", "RowSync-fused",
              "serial-sk", "--commit", "abc", "--dirty", "0", "--out-dir", str(tmp_path))
    result = json.loads((tmp_path / "cpu-mlp.json").read_text())
    assert result["weight_sets"] == 2
    assert {r["impl"] for r in result["rows"]} == {"xla", "serial", "auto"}
    assert all(r["rel_err"] < 3e-2 for r in result["rows"])
    sys.path.insert(0, str(BENCH))
    try:
        import mlp as mlp_bench
    finally:
        sys.path.remove(str(BENCH))
    # The chain over sets applies each set's weights in order.
    step = mlp_bench.over_weight_sets(lambda v, a, b, c, d: v * a + b + c + d, 2)
    assert step(1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 1.0, 0.0, 0.0) == (1.0 * 2.0) * 3.0 + 1.0


def test_ncu_table_reads_ncu_csv_with_its_units(tmp_path):
    # bench/ncu_table.py: one line per launch ID of `ncu --metrics ... --csv`, ncu's
    # per-value units scaled to us, kcycles, MHz and MB, the tensor share a quarter
    # of the hmma cycles over the elapsed ones.
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
            '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
    ours = "void cusync_sm90::chain_kernel_sm90<cusync_sm90::ChainConfig<cutlass::half_t, 128, true, 1> >(T1)"

    def row(i, kernel, grid, metric, unit, value):
        return f'"{i}","1","python3","h","{kernel}","1","7","(384, 1, 1)","{grid}","0","9.0","m","{metric}","{unit}","{value}"'
    lines = ["==PROF== Connected to process", head,
             row(0, ours, "(132, 1, 1)", "gpu__time_duration.sum", "usecond", "217.50"),
             row(0, ours, "(132, 1, 1)", "sm__cycles_elapsed.max", "cycle", "300,000"),
             row(0, ours, "(132, 1, 1)", "sm__pipe_tensor_op_hmma_cycles_active.avg", "cycle", "960,000"),
             row(0, ours, "(132, 1, 1)", "sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.41"),
             row(0, ours, "(132, 1, 1)", "dram__bytes_read.sum", "Gbyte", "1.25"),
             row(1, "nvjet_sm90_hsh_192x128", "(128, 1, 1)", "gpu__time_duration.sum", "msecond", "0.19")]
    (tmp_path / "ncu.csv").write_text("\n".join(lines) + "\n")
    out = run_bench("ncu_table.py", str(tmp_path / "ncu.csv"))
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["0", "1"]
    assert rows[0][-5:] == ["217.5", "300.0", "1410", "80.0", "1250.0"]  # us, kcyc, MHz, tensor %, DRAM MB
    assert rows[1][1].startswith("nvjet") and rows[1][-1] == "190.0"
