// The nanobind module of the CPU backend: FFI handler capsules for
// jax.ffi.register_ffi_target, build information, and read-only views of the
// cuSync core (tile orders, policies) so Python tests check the one definition
// the kernels use rather than a copy of it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <tuple>
#include <utility>
#include <vector>

#include "common/conv_spec.h"
#include "common/mlp_spec.h"
#include "cusync/dependency.h"
#include "cusync/divisor.h"
#include "cusync/halo_tiling.h"
#include "cusync/placed_schedule.h"
#include "cusync/policy.h"
#include "cusync/satisfied_semaphores.h"
#include "cusync/stage.h"
#include "cusync/sync_layout.h"
#include "cusync/tile_order.h"
#include "xla/ffi/api/ffi.h"

namespace nb = nanobind;

extern "C" XLA_FFI_Error* CusyncSyncedMlpCpu(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* CusyncSyncedConvPairCpu(XLA_FFI_CallFrame*);

namespace {

template <typename T>
nb::capsule encapsulate(T* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn), "xla._CUSTOM_CALL_TARGET");
}

cusync::Stage make_stage(int rows, int cols, int slices, int tile_rows, int tile_cols, int order) {
  return cusync::Stage{rows, cols, slices, tile_rows, tile_cols, static_cast<cusync::TileOrder>(order)};
}

// The tiling the halo conv runs for a pair of these channels (in, mid, out).
cusync::HaloTiling planned_halo_tiling(int images, int height, int width, std::tuple<int, int, int> channels) {
  const auto [c0, c1, c2] = channels;
  return cusync::plan_halo_tiling(images, height, width, c0, c1, c2);
}

}  // namespace

NB_MODULE(_cusync_cpu, m) {
  m.doc() = "cusync_jax CPU backend: XLA FFI handlers and the cuSync core";

  m.attr("SYNC_HEADER_WORDS") = static_cast<int>(cusync::kSyncHeaderWords);

  m.def("registrations", [] {
    nb::dict d;
    d["cusync_synced_mlp"] = encapsulate(CusyncSyncedMlpCpu);
    d["cusync_synced_conv_pair"] = encapsulate(CusyncSyncedConvPairCpu);
    return d;
  });

  m.def(
      "mlp_sync_words",
      [](int tokens, int hidden, int ffn, int out, int slices, std::vector<int> tile1, std::vector<int> tile2,
         bool stream_k1, bool stream_k2, int stream_k_ctas, int mode) {
        cusync_ffi::MlpSpec s;
        s.mode = static_cast<cusync_ffi::Mode>(mode);
        s.tokens = tokens;
        s.hidden = hidden;
        s.ffn = ffn;
        s.out = out;
        s.producer = make_stage(tokens, ffn, slices, tile1.at(0), tile1.at(1), 0);
        s.consumer = make_stage(tokens, out, 1, tile2.at(0), tile2.at(1), 0);
        s.tile_k1 = tile1.at(2);
        s.tile_k2 = tile2.at(2);
        s.stream_k1 = stream_k1;
        s.stream_k2 = stream_k2;
        s.stream_k_ctas = stream_k_ctas;
        return static_cast<long long>(cusync_ffi::mlp_sync_layout(s).words);
      },
      nb::arg("tokens"), nb::arg("hidden"), nb::arg("ffn"), nb::arg("out"), nb::arg("slices"), nb::arg("tile1"),
      nb::arg("tile2"), nb::arg("stream_k1"), nb::arg("stream_k2"), nb::arg("stream_k_ctas"), nb::arg("mode"),
      "int32 words of a synced-MLP call's sync buffer (cusync/sync_layout.h, common/mlp_spec.h): the "
      "semaphores, with stream-K the tile counts and fp32 partial sums, in fused mode (code 2) the "
      "placed schedule's flags.");

  m.def(
      "placed_schedule_claims",
      [](int tiles0, int positions, int units, std::vector<int> turns) {
        if (tiles0 < 0 || positions < tiles0 || units < 1)
          throw nb::value_error("placed_schedule_claims: expected 0 <= tiles0 <= positions and units >= 1");
        std::vector<int> flags(positions, 0);
        int cursors[2] = {0, 0};
        const cusync::PlacedSchedule s{flags.data(), cursors, tiles0, positions, units};
        std::vector<cusync::PlacedClaim> claims;
        for (int u = 0; u < units; ++u) claims.push_back(cusync::placed_start(s, u));
        std::vector<std::vector<int>> taken(units);
        std::vector<bool> done(units, false);
        for (int u : turns) {
          if (u < 0 || u >= units) throw nb::value_error("placed_schedule_claims: a turn names no unit");
          if (done[u]) continue;
          const int pos = cusync::placed_next(s, claims[u]);
          if (pos >= positions) done[u] = true;
          else taken[u].push_back(pos);
        }
        return taken;
      },
      nb::arg("tiles0"), nb::arg("positions"), nb::arg("units"), nb::arg("turns"),
      "Each unit's positions of the placed fused schedule (cusync/placed_schedule.h) when units claim "
      "one position a turn in the order `turns` names them (a unit with none left skips its turn).");

  m.def("stream_k_ctas_per_row", &cusync::stream_k_ctas_per_row, nb::arg("rows"), nb::arg("cols"),
        nb::arg("k_blocks"), nb::arg("ctas"),
        "CTA ranges per row of tiles of a stage run stream-K on `ctas` CTAs (cusync/stream_k.h).");

  m.def(
      "stream_k_schedule",
      [](int rows, int cols, int k_blocks, int ctas, int cluster_rows) {
        // Each CTA's segments in the order it runs them, walked as the kernel's
        // loader walks them.
        const cusync::StreamK sk = cusync::make_stream_k(rows, cols, k_blocks, ctas, cluster_rows);
        std::vector<std::vector<std::tuple<int, int, int, int, int, int>>> out(sk.ctas());
        for (int c = 0; c < sk.ctas(); ++c) {
          const int end = sk.cta_end(c);
          for (int u = sk.cta_begin(c); u < end;) {
            const cusync::StreamKSegment s = sk.segment(sk.row_of(c), u, end);
            out[c].emplace_back(s.tile.row, s.tile.col, s.kb0, s.kb1, s.slot, s.count);
            u += s.kb1 - s.kb0;
          }
        }
        return std::make_pair(sk.max_segments(), out);
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("k_blocks"), nb::arg("ctas"), nb::arg("cluster_rows") = 1,
      "(max_segments, per CTA its segments (row, col, kb0, kb1, slot, count)) of a stage run stream-K "
      "(cusync/stream_k.h); cluster_rows 2: the lines padded for 2x1 clusters.");

  m.def(
      "conv_sync_words",
      [](int images, int height, int width, int c0, int c1, int c2, std::vector<int> filters,
         std::vector<int> tile1, std::vector<int> tile2, int splits1, int splits2, int kernel, int mode) {
        cusync_ffi::ConvPairSpec s;
        s.mode = static_cast<cusync_ffi::Mode>(mode);
        const int pixels = images * height * width;
        s.images = images;
        s.height = height;
        s.width = width;
        s.in_channels = c0;
        s.mid_channels = c1;
        s.out_channels = c2;
        s.filter_r1 = filters.at(0);
        s.filter_s1 = filters.at(1);
        s.filter_r2 = filters.at(2);
        s.filter_s2 = filters.at(3);
        s.producer = make_stage(pixels, c1, 1, tile1.at(0), tile1.at(1), 0);
        s.consumer = make_stage(pixels, c2, 1, tile2.at(0), tile2.at(1), 0);
        s.tile_k1 = tile1.at(2);
        s.tile_k2 = tile2.at(2);
        s.splits1 = splits1;
        s.splits2 = splits2;
        s.kernel = kernel;
        return static_cast<long long>(cusync_ffi::conv_sync_layout(s).words);
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("c0"), nb::arg("c1"), nb::arg("c2"),
      nb::arg("filters"), nb::arg("tile1"), nb::arg("tile2"), nb::arg("splits1"), nb::arg("splits2"), nb::arg("kernel"),
      nb::arg("mode"),
      "int32 words of a conv pair's sync buffer (cusync/sync_layout.h, common/conv_spec.h): the semaphores, "
      "with split-K the tile counts and fp32 partial sums, and on the Hopper kernel in fused mode the "
      "placed schedule's flags. filters: (R1, S1, R2, S2).");

  m.def(
      "halo_tiling",
      [](int images, int height, int width, bool row_tiles) {
        const cusync::HaloTiling g = cusync::make_halo_tiling(images, height, width, row_tiles);
        std::vector<std::tuple<int, int, int, int, std::vector<int>>> out;
        for (int i = 0; i < g.tiles(); ++i) {
          const cusync::HaloTile t = g.tile(i);
          std::vector<int> deps;
          g.for_each_dependency(i, [&](int d) { deps.push_back(d); });
          out.emplace_back(t.image, t.h0, t.w0, t.a0, std::move(deps));
        }
        return std::make_tuple(g.bw, g.rows, g.span, std::move(out));
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("row_tiles") = false,
      "The halo conv's tiling (cusync/halo_tiling.h; row_tiles: the row-tile tiling): (BW, R, span, [(image, h0, "
      "w0, a0, dependencies)] per tile), a tile's dependencies being the tiles whose outputs its halo reads.");

  m.def(
      "halo_plan_row_tiles",
      [](int images, int height, int width, std::tuple<int, int, int> channels) {
        return planned_halo_tiling(images, height, width, channels).row_tiles;
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("channels"),
      "Padded rows a tile of the tiling the halo conv runs for this pair (channels: in, mid, out), 0 where it "
      "runs 128-position tiles (cusync::plan_halo_tiling).");

  m.def(
      "halo_stages",
      [](int images, int height, int width, std::tuple<int, int, int> channels, bool row_tiles) {
        const auto [c0, c1, c2] = channels;
        const cusync::HaloTiling g = cusync::make_halo_tiling(images, height, width, row_tiles);
        return cusync::halo_stages(g, cusync::halo_resident_b(c0, c1, c2), cusync::kHaloSmemLimit);
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("channels"), nb::arg("row_tiles"),
      "Ring stages of the halo conv's shared memory on sm_90 for this pair under the given tiling.");

  m.def(
      "halo_tile_count",
      [](int images, int height, int width, std::tuple<int, int, int> channels) {
        return planned_halo_tiling(images, height, width, channels).tiles();
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("channels"),
      "Position tiles of the tiling the halo conv runs for this pair (channels: in, mid, out; "
      "cusync/halo_tiling.h), without building their dependency lists.");

  m.def(
      "halo_second_half_live",
      [](int images, int height, int width, bool row_tiles) {
        const cusync::HaloTiling g = cusync::make_halo_tiling(images, height, width, row_tiles);
        std::vector<bool> out;
        for (int i = 0; i < g.tiles(); ++i) out.push_back(g.second_half_live(i));
        return out;
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("row_tiles") = false,
      "Per tile of the halo conv's tiling: whether its second 64-row chain (positions 64..127; paired: the "
      "second image) holds an output pixel.");

  m.def(
      "halo_one_chain",
      [](int images, int height, int width, bool row_tiles) {
        return cusync::make_halo_tiling(images, height, width, row_tiles).one_chain();
      },
      nb::arg("images"), nb::arg("height"), nb::arg("width"), nb::arg("row_tiles") = false,
      "Whether no tile of the halo conv's tiling has a pixel in its second 64-row chain (the kernel then runs "
      "one chain a tile).");

  m.def(
      "stage_schedule",
      [](int rows, int cols, int slices, int tile_rows, int tile_cols, int order, int group_rows) {
        cusync::Stage st = make_stage(rows, cols, slices, tile_rows, tile_cols, order);
        st.group_rows = group_rows;
        std::vector<std::pair<int, int>> out;
        for (int i = 0; i < st.tile_count(); ++i) {
          const cusync::Tile t = st.tile(i);
          out.emplace_back(t.row, t.col);
        }
        return out;
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("slices"), nb::arg("tile_rows"), nb::arg("tile_cols"),
      nb::arg("order"), nb::arg("group_rows") = cusync::kGroupRows,
      "The tiles of a stage in the order they are handed out.");

  m.def(
      "stage_tile_bounds",
      [](int rows, int cols, int slices, int tile_rows, int tile_cols, int order, int group_rows, bool precomputed) {
        cusync::Stage st = make_stage(rows, cols, slices, tile_rows, tile_cols, order);
        st.group_rows = group_rows;
        const cusync::StageDivisors d(st);
        std::vector<std::tuple<int, int, int, int, int, int>> out;
        auto add = [&](cusync::Tile t, const auto& per_slice) {
          out.emplace_back(t.row, t.col, st.row_begin(t), st.row_end(t), st.col_begin(t, per_slice),
                           st.col_end(t, per_slice));
        };
        for (int i = 0; i < st.tile_count(); ++i) {
          if (precomputed) add(d.tile(st, i), d.tiles_per_slice);
          else add(st.tile(i), cusync::IntDivisor{st.tiles_per_slice()});
        }
        return out;
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("slices"), nb::arg("tile_rows"), nb::arg("tile_cols"),
      nb::arg("order"), nb::arg("group_rows"), nb::arg("precomputed"),
      "Per schedule position, (tile row, tile col, row_begin, row_end, col_begin, col_end); precomputed: "
      "through the stage's StageDivisors (the GPU kernels' path) instead of plain division.");

  m.def(
      "fast_divide",
      [](int n, int d) {
        if (d < 1) throw nb::value_error("fast_divide: the divisor must be at least 1");
        if (n < 0) throw nb::value_error("fast_divide: the dividend must be non-negative");
        const cusync::FastDivisor f(d);
        return std::make_pair(f.div(n), f.mod(n));
      },
      nb::arg("n"), nb::arg("d"), "(n / d, n % d) through cusync::FastDivisor (divisor.h).");

  m.def(
      "policy_semaphores",
      [](int policy, int under_wait, int rows, int cols, int slices, int tile_rows, int tile_cols) {
        const cusync::Stage st = make_stage(rows, cols, slices, tile_rows, tile_cols, 0);
        const cusync::Policy p{static_cast<cusync::PolicyKind>(policy), under_wait};
        std::vector<int> posts;
        for (int r = 0; r < st.grid_rows(); ++r)
          for (int c = 0; c < st.grid_cols(); ++c) posts.push_back(p.post_semaphore(st, {r, c}));
        return std::make_tuple(p.semaphore_count(st), p.posts_per_semaphore(st), posts);
      },
      nb::arg("policy"), nb::arg("under_wait"), nb::arg("rows"), nb::arg("cols"), nb::arg("slices"),
      nb::arg("tile_rows"), nb::arg("tile_cols"),
      "(semaphore count, posts per semaphore, post target of each producer tile in row-major order).");

  m.def(
      "policy_waits",
      [](int policy, int under_wait, int rows, int cols, int slices, int tile_rows, int tile_cols,
         int row_begin, int row_end, int col_begin, int col_end) {
        const cusync::Stage st = make_stage(rows, cols, slices, tile_rows, tile_cols, 0);
        const cusync::Policy p{static_cast<cusync::PolicyKind>(policy), under_wait};
        std::vector<std::pair<int, int>> waits;
        p.for_each_wait(st, cusync::Region{row_begin, row_end, col_begin, col_end},
                        [&](int sem, int count) { waits.emplace_back(sem, count); });
        return waits;
      },
      nb::arg("policy"), nb::arg("under_wait"), nb::arg("rows"), nb::arg("cols"), nb::arg("slices"),
      nb::arg("tile_rows"), nb::arg("tile_cols"), nb::arg("row_begin"), nb::arg("row_end"),
      nb::arg("col_begin"), nb::arg("col_end"),
      "The (semaphore, count) waits of a consumer step reading a producer region.");

  m.def(
      "policy_wait_span",
      [](int policy, int under_wait, int rows, int cols, int slices, int tile_rows, int tile_cols,
         int row_begin, int row_end, int col_begin, int col_end) {
        const cusync::Stage st = make_stage(rows, cols, slices, tile_rows, tile_cols, 0);
        const cusync::Policy p{static_cast<cusync::PolicyKind>(policy), under_wait};
        const auto s = p.wait_span(st, cusync::Region{row_begin, row_end, col_begin, col_end});
        return std::make_tuple(s.count, s.lo, s.hi);
      },
      nb::arg("policy"), nb::arg("under_wait"), nb::arg("rows"), nb::arg("cols"), nb::arg("slices"),
      nb::arg("tile_rows"), nb::arg("tile_cols"), nb::arg("row_begin"), nb::arg("row_end"),
      nb::arg("col_begin"), nb::arg("col_end"),
      "(count, lowest, highest) of the semaphores policy_waits names for the region, computed without "
      "walking them (count 0, highest -1: none).");

  m.def(
      "semaphores_to_acquire",
      [](const std::vector<int>& named) {
        auto ready = cusync::SatisfiedSemaphores::none();
        std::vector<bool> acquire;
        for (int sem : named) {
          acquire.push_back(!ready.has(sem));
          if (acquire.back()) ready.add(sem);
        }
        return acquire;
      },
      nb::arg("named"),
      "For each semaphore a tile's k-blocks name, in order: whether the tile acquires it "
      "(false: already seen satisfied in this tile).");

  m.def(
      "conv_dependency",
      [](int height, int width, int channels, int filter_r, int filter_s, int images, int row_begin,
         int row_end, int k_begin, int k_end) {
        const cusync::ConvGeometry g{height, width, channels, filter_r, filter_s};
        const cusync::Region r = cusync::conv_dependency(g, images, row_begin, row_end, k_begin, k_end);
        return std::make_tuple(r.row_begin, r.row_end, r.col_begin, r.col_end);
      },
      "The producer region an implicit-GEMM conv step reads.");
}
