"""The wave model and the planner."""
import pytest

import cusync_jax as cs
from cusync_jax import _cusync_cpu as core
from cusync_jax import planner
from cusync_jax.planner import makespan


def test_paper_gpt3_on_v100_five_waves_become_four():
    # GPT-3 MLP (H = 12288, 8-way tensor parallel: ffn 6144) at B = 1024 on an
    # 80-SM V100 with 256x128 tiles, two per SM: 192 + 384 tiles.
    r = cs.plan_mlp(1024, 12288, 6144, device="v100", tile=(256, 128, 32))
    assert (r.tiles1, r.tiles2, r.slots) == (192, 384, 160)
    assert (r.grid1, r.grid2) == ((4, 48), (4, 96))
    assert (r.waves_stream, r.waves_synced, r.waves_saved) == (5, 4, 1)
    assert r.makespan_synced < r.makespan_stream


def test_paper_policy_choice_by_batch():
    small = cs.plan_mlp(256, 12288, 6144, device="v100", tile=(256, 128, 32))
    large = cs.plan_mlp(2048, 12288, 6144, device="v100", tile=(256, 128, 32))
    assert small.policy == cs.TileSync()
    assert large.policy == cs.RowSync()
    # SwiGLU: one wait for gate and up, where the kernel measured it faster.
    swiglu = cs.plan_mlp(1024, 8192, 2816, activation="swiglu", device="cpu")
    assert swiglu.policy == cs.StridedSync(2) and swiglu.plan.order1 == "strided"
    assert swiglu.grid1[1] % 2 == 0
    hopper = cs.plan_mlp(1024, 8192, 2816, activation="swiglu", device="h200", allow_fallback=False)
    assert hopper.policy == cs.RowSync()


def test_user_choices_are_kept():
    r = cs.plan_mlp(512, 1024, 2048, device="cpu", tile=((32, 64, 16), (16, 32, 8)), policy="rowsync",
                    mode="streams")
    assert r.plan.tile1 == cs.TileShape(32, 64, 16) and r.plan.tile2 == cs.TileShape(16, 32, 8)
    assert r.policy == cs.RowSync() and r.mode == "streams"


def test_makespan_list_schedule():
    assert makespan([1.0] * 10, 4) == 3.0
    assert makespan([3.0, 1.0, 1.0, 1.0], 2) == 3.0
    assert makespan([], 4) == 0.0


def test_no_wave_saved_when_both_fit():
    r = cs.plan_mlp(128, 1024, 1024, device="h200", tile=(128, 128, 32))
    assert r.waves_stream == 2 and r.waves_synced == 1


def test_row_sync_consumers_wait_for_their_rows_in_the_model():
    # Two producer rows of 48 tiles fill one 132-slot wave; RowSync consumers
    # that start early only hold slots until their row is done: no gain.
    r = cs.plan_mlp(256, 12288, 6144, device="h200", tile=(128, 128, 64), policy="rowsync",
                    mode="fused", order="row_major")
    assert r.makespan_synced == r.makespan_stream
    # At 768 tokens a partial wave of the producer is filled with consumers.
    r = cs.plan_mlp(768, 12288, 6144, device="h200", tile=(128, 128, 64), policy="rowsync",
                    mode="fused", order="row_major")
    assert r.makespan_synced < 0.9 * r.makespan_stream


def test_grouped_rows_finish_with_their_band():
    # Grouped (bands of 8 tile rows): at 768 tokens (6 rows, one band) every
    # row finishes with the band's last column, so RowSync consumers cannot
    # start early; with 2-row bands they can again. (Measured on the H200:
    # fused@grouped lost to serial@grouped at 256-1024 tokens.)
    def ratio(tokens, **kw):
        r = cs.plan_mlp(tokens, 12288, 6144, device="h200", policy="rowsync", mode="fused",
                        order="grouped", **kw)
        return r.makespan_synced / r.makespan_stream
    assert ratio(768) == 1.0
    assert ratio(768, group_rows=2) < 0.95
    # Several bands: the first band's consumers fill the producer's tail.
    assert ratio(1536) < 0.97


def test_auto_runs_in_stream_order_when_nothing_can_be_saved():
    assert cs.plan_mlp(256, 12288, 6144, device="h200", allow_fallback=False).mode == "serial"
    assert cs.plan_mlp(768, 12288, 6144, device="h200", allow_fallback=False,
                       order="row_major").mode == "fused"
    # One grouped band: nothing to save (the measured default order on Hopper).
    assert cs.plan_mlp(768, 12288, 6144, device="h200", allow_fallback=False).mode == "serial"
    # An explicit mode is kept.
    assert cs.plan_mlp(256, 12288, 6144, device="h200", mode="fused").mode == "fused"


def test_tiles_without_a_swiglu_form_are_not_planned_for_swiglu():
    for tokens in (64, 256, 1024, 4096):
        rep = cs.plan_mlp(tokens, 4096, 5632, activation="swiglu", device="h200", allow_fallback=False)
        assert rep.plan.tile1 != cs.TileShape(128, 96, 64)
    with pytest.raises(ValueError, match="128x96x64 has no SwiGLU form"):
        cs.plan_mlp(256, 4096, 5632, activation="swiglu", device="h200", tile=(128, 96, 64))


def test_kernel_families_follow_the_device_architecture():
    hopper = cs.plan_mlp(1024, 12288, 6144, device="h200")
    ampere = cs.plan_mlp(1024, 12288, 6144, device="a100")
    assert hopper.plan.kernel == 1 and ampere.plan.kernel == 0
    with pytest.raises(ValueError, match="no CUDA kernel of this build runs on V100"):
        cs.plan_mlp(1024, 12288, 6144, device="v100")


def test_default_tile_order_is_the_kernels_measured_one():
    hopper = cs.plan_mlp(1024, 12288, 6144, device="h200", policy="rowsync", mode="fused")
    assert hopper.plan.order1 == hopper.plan.order2 == "grouped"
    ampere = cs.plan_mlp(1024, 12288, 6144, device="a100", policy="rowsync", mode="fused")
    assert ampere.plan.order1 == ampere.plan.order2 == "row_major"
    kept = cs.plan_mlp(1024, 12288, 6144, device="h200", policy="rowsync", order="row_major")
    assert kept.plan.order1 == "row_major"


def test_cluster_m_is_opt_in_and_validated():
    assert cs.plan_mlp(2048, 4096, 16384, device="h200").plan.cluster_m == 1
    r = cs.plan_mlp(2048, 4096, 16384, device="h200", cluster_m=2, policy="rowsync", mode="fused")
    assert r.plan.cluster_m == 2 and r.plan.kernel == 1 and r.source == "user"
    assert (r.plan.tile1.m, r.plan.tile1.n, r.plan.tile1.k) == (128, 128, 64)
    assert r.plan.attributes(0)["cluster_m"] == 2
    assert cs.plan_mlp(256, 512, 512, device="h200").plan.attributes(0)["cluster_m"] == 1
    for bad in (0, 3, 2.0, True):
        with pytest.raises(ValueError, match="cluster_m"):
            cs.plan_mlp(256, 512, 512, device="h200", cluster_m=bad)
    with pytest.raises(ValueError, match="cluster_m"):
        cs.plan_mlp(256, 512, 512, device="h200", cluster_m=2, tile=(128, 256, 64))
    with pytest.raises(ValueError, match="SwiGLU"):
        cs.plan_mlp(256, 512, 512, device="h200", activation="swiglu", cluster_m=2)
    with pytest.raises(ValueError, match="Hopper"):
        cs.plan_mlp(256, 512, 512, device="a100", cluster_m=2)


def test_stream_k_where_whole_tiles_fill_the_last_wave_badly():
    # GPT-3's GEMMs on the H200 (132 SMs), 128x128 tiles: measured 0.81-0.94x
    # with stream-K at 512-768 tokens; not at one wave (256 tokens, producer)
    # nor at K = 2816 (LLaMA's consumer).
    sk = lambda tokens, hidden, ffn, act="gelu": cs.plan_mlp(
        tokens, hidden, ffn, activation=act, device="h200", mode="serial",
        tile=(128, 128, 64), stream_k="auto").plan.stream_k
    assert sk(256, 12288, 6144) == (False, True)
    assert sk(512, 12288, 6144) == (True, False)   # the consumer's 384 tiles take 2.9 of 3 waves
    assert sk(768, 12288, 6144) == (True, True)
    assert sk(512, 8192, 2816, "swiglu") == (True, False)
    assert sk(4096, 12288, 6144) == (False, False)
    plan = cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(128, 128, 64),
                       stream_k="auto").plan
    assert plan.stream_k_ctas == 132 and plan.attributes(0)["stream_k1"] == 1
    # Off unless asked for.
    assert cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial").plan.stream_k == (False, False)


def test_stream_k_explicit_and_refused_where_it_cannot_run():
    plan = cs.plan_mlp(4096, 1024, 4096, device="h200", mode="serial", tile=(128, 128, 64),
                       stream_k=(True, False)).plan
    assert plan.stream_k == (True, False)
    with pytest.raises(ValueError, match="with 128x128x64 or 128x192x64 tiles"):
        cs.plan_mlp(4096, 1024, 4096, device="h200", mode="serial", tile=(128, 256, 64), stream_k=True)
    assert cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(128, 128, 64),
                       stream_k=False).plan.stream_k == (False, False)
    with pytest.raises(ValueError, match="stream-K runs in serial mode"):
        cs.plan_mlp(768, 12288, 6144, device="h200", mode="fused", tile=(128, 128, 64), stream_k=True)
    with pytest.raises(ValueError, match="stream-K runs in serial mode"):
        cs.plan_mlp(768, 1024, 4096, device="cpu", mode="serial", stream_k=True)
    with pytest.raises(ValueError, match="stream_k: expected None, 'auto', a bool"):
        cs.plan_mlp(768, 1024, 4096, device="h200", mode="serial", stream_k=1)
    # The rule never takes it in other modes, nor on the CPU.
    assert cs.plan_mlp(768, 12288, 6144, device="h200", mode="fused", stream_k="auto").plan.stream_k == (
        False, False)
    assert cs.plan_mlp(768, 1024, 4096, device="cpu", mode="serial", stream_k="auto").plan.stream_k == (
        False, False)


def test_each_gemm_takes_the_tile_that_fills_the_sms():
    # GPT-3 on the H200 (132 SMs). At 256 tokens the producer's 96 tiles of
    # 128x128 take one wave and its 64 of 128x192 one longer one; the
    # consumer's 128 tiles of 128x192 take one wave where 192 of 128x128 take
    # two. Serial mode launches each GEMM on its own, so each takes its own.
    t128, t192 = cs.TileShape(128, 128, 64), cs.TileShape(128, 192, 64)
    plan = cs.plan_mlp(256, 12288, 6144, device="h200", mode="serial").plan
    assert (plan.tile1, plan.tile2) == (t128, t192)
    assert plan.attributes(0)["tile_n1"] == 128 and plan.attributes(0)["tile_n2"] == 192
    # 512 tokens: 128 producer tiles of 128x192 (one wave) against 192 of 128x128.
    assert cs.plan_mlp(512, 12288, 6144, device="h200", mode="serial").plan.tile1 == t192
    # The fused kernel runs both GEMMs with one tile.
    fused = cs.plan_mlp(256, 12288, 6144, device="h200", mode="fused").plan
    assert fused.tile1 == fused.tile2
    with pytest.raises(ValueError, match="fused mode runs both GEMMs in one kernel"):
        cs.plan_mlp(256, 12288, 6144, device="h200", mode="fused", tile=(t128, t192))
    # Two tiles without a mode: serial.
    assert cs.plan_mlp(256, 12288, 6144, device="h200", tile=(t128, t192)).plan.mode == "serial"
    # A SwiGLU producer has no 128x192 form; its consumer may.
    for tokens in (256, 512, 768):
        rep = cs.plan_mlp(tokens, 8192, 2816, activation="swiglu", device="h200", mode="serial")
        assert rep.plan.tile1 in (t128, cs.TileShape(128, 256, 64))


def test_tokens_as_n_tiles_run_only_where_named():
    # 96x128 (tokens as N) is opt-in: no automatic plan takes it, a named one
    # runs it, with its SwiGLU form, and the fused mode needs it on both GEMMs.
    t96, t128 = cs.TileShape(96, 128, 64), cs.TileShape(128, 128, 64)
    for tokens in (256, 512, 768, 4096):
        for act, ffn in (("gelu", 6144), ("swiglu", 2816)):
            for mode in ("auto", "serial", "streams", "fused"):
                plan = cs.plan_mlp(tokens, 8192, ffn, activation=act, device="h200", mode=mode,
                                   allow_fallback=False).plan
                assert t96 not in (plan.tile1, plan.tile2), (tokens, act, mode)
    rep = cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200", mode="serial", tile=(t96, t128))
    assert (rep.plan.tile1, rep.plan.tile2) == (t96, t128)
    assert rep.plan.attributes(0)["tile_m1"] == 96 and rep.plan.attributes(0)["tile_n1"] == 128
    # 256 tokens in 96-row tiles: 3 rows of 44 SwiGLU tiles (64 columns of h each) fill 132 SMs.
    assert rep.tiles1 == 3 * 44
    with pytest.raises(ValueError, match="fused mode runs both GEMMs in one kernel"):
        cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200", mode="fused", tile=(t96, t128))


def test_stream_k_runs_on_the_gemm_with_its_tile():
    t128, t192, t256 = cs.TileShape(128, 128, 64), cs.TileShape(128, 192, 64), cs.TileShape(128, 256, 64)
    plan = cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(t128, t192),
                       stream_k="auto").plan
    assert plan.stream_k == (True, False)
    assert cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(t128, t192),
                       stream_k=True).plan.stream_k == (True, True)
    assert cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(t128, t256),
                       stream_k=(True, False)).plan.stream_k == (True, False)
    with pytest.raises(ValueError, match="with 128x128x64 or 128x192x64 tiles"):
        cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", tile=(t128, t256), stream_k=True)


def test_stream_k_splits_tiles_evenly_where_a_row_fits_its_share():
    # GPT-3's first GEMM at 256 tokens in 128x192 tiles: 2 rows of 32 tiles
    # on 132 SMs. Each row's 66 CTAs take 64 ranges, two per tile (split-K 2
    # on 128 CTAs), not 66 ranges that straddle tiles.
    assert core.stream_k_ctas_per_row(2, 32, 192, 132) == 64
    assert planner.stream_k_waves(2, 32, 192, 132) == 0.5
    # A row with more tiles than its share keeps one range per CTA.
    assert core.stream_k_ctas_per_row(2, 96, 96, 132) == 66
    # 128x128 there: 48 tiles a row, one range each, so whole tiles (no gain).
    assert core.stream_k_ctas_per_row(2, 48, 192, 132) == 48
    assert not planner.stream_k_pays(2, 48, 192, 132)
    assert planner.stream_k_pays(2, 32, 192, 132)
    # stream_k="auto" takes it for GPT-3's producer at 256 tokens: half tiles
    # of 128x192 on 128 SMs beat whole 128x128 tiles on 96.
    plan = cs.plan_mlp(256, 12288, 6144, device="h200", mode="serial", stream_k="auto").plan
    assert (plan.tile1.n, plan.stream_k[0]) == (192, True)
    _, per_cta = core.stream_k_schedule(2, 32, 192, 132)
    assert len(per_cta) == 128 and all(len(segs) == 1 and segs[0][3] - segs[0][2] == 96 for segs in per_cta)


def test_stream_k_auto_weighs_a_stream_k_gemm_against_wider_tiles():
    # GPT-3 at 768 tokens: the producer's 288 tiles of 128x128 take 2.2 waves,
    # stream-K evens them out (measured 185 us against 222 with 192 tiles of
    # 128x192, 1.45 waves); the consumer keeps 128x192 (384 tiles, 2.9 waves).
    plan = cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial", stream_k="auto").plan
    assert (plan.tile1.n, plan.tile2.n, plan.stream_k) == (128, 192, (True, False))
    # Without stream-K both GEMMs take 128x192.
    plan = cs.plan_mlp(768, 12288, 6144, device="h200", mode="serial").plan
    assert (plan.tile1.n, plan.tile2.n, plan.stream_k) == (192, 192, (False, False))
    # At 512 tokens 128 tiles of 128x192 fill one wave: better than stream-K.
    plan = cs.plan_mlp(512, 12288, 6144, device="h200", mode="serial", stream_k="auto").plan
    assert (plan.tile1.n, plan.stream_k) == (192, (False, False))


def test_mma_schedule_is_a_plan_choice_of_whole_128x128_and_96x128_tiles():
    auto = cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200", policy="rowsync", mode="fused",
                       tile=(128, 128, 64)).plan
    assert auto.mma_schedule == "auto" and auto.attributes(0)["mma_schedule"] == 0
    for name, code in (("pingpong", 1), ("cooperative", 2)):
        plan = cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200", policy="rowsync",
                           mode="fused", tile=(128, 128, 64), mma_schedule=name).plan
        assert plan.mma_schedule == name and plan.attributes(0)["mma_schedule"] == code
    # One GEMM on whole 128x128 tiles is enough for the choice to apply.
    pair = cs.plan_mlp(256, 12288, 6144, device="h200", mode="serial",
                       tile=((128, 128, 64), (128, 192, 64)), mma_schedule="cooperative").plan
    assert pair.mma_schedule == "cooperative"
    # 96x128 tiles (tokens as N) come in both forms too.
    tok = cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200", mode="serial",
                      tile=((96, 128, 64), (128, 192, 64)), mma_schedule="pingpong").plan
    assert tok.mma_schedule == "pingpong" and tok.attributes(0)["mma_schedule"] == 1
    with pytest.raises(ValueError, match="mma_schedule: expected one of"):
        cs.plan_mlp(256, 512, 512, device="h200", mma_schedule="coop")
    # Nothing for it to choose: wider tiles, clusters, stream-K, the CPU executor.
    for kw in (dict(tile=(128, 256, 64)), dict(tile=(128, 128, 64), cluster_m=2),
               dict(tile=(128, 128, 64), stream_k=True)):
        with pytest.raises(ValueError, match="mma_schedule='pingpong': applies to whole 128x128x64"):
            cs.plan_mlp(1024, 4096, 4096, device="h200", mode="serial", policy="rowsync",
                        mma_schedule="pingpong", **kw)
    with pytest.raises(ValueError, match="mma_schedule='cooperative'"):
        cs.plan_mlp(256, 512, 512, device="cpu", mma_schedule="cooperative")
    # A choice made by hand is not the measured table's: the model plans it.
    assert cs.plan_mlp(256, 8192, 2816, activation="swiglu", device="h200",
                       mma_schedule="cooperative").source != "measured"
