// Layout of a call's sync buffer: the int32 words that hold its tile counters
// and semaphores. The buffer is an output of the op (so XLA owns it, it is
// distinct for every call in flight) and is zeroed on the stream at the start
// of every call that counts or waits on it (words_to_zero below).
#pragma once

#include "defs.h"
#include "policy.h"
#include "stage.h"
#include "stream_k.h"

namespace cusync {

enum SyncWord : int {
  kProducerCounter = 0,  // next producer schedule position (streams mode)
  kConsumerCounter = 1,  // next consumer schedule position (streams mode)
  kFusedCounter = 2,     // next position of the fused producer-then-consumer schedule
  kProducerStarted = 3,  // set by the first producer block; the wait kernel spins on it
  kPlacedCursors = 4,    // two words: the placed fused schedule's stealing cursors (placed_schedule.h)
  kSyncHeaderWords = 8,  // semaphores start here
};

// Words a call needs: the header plus one semaphore per producer tile, which
// bounds every policy's semaphore count.
CUSYNC_HD int sync_words(const Stage& producer) { return kSyncHeaderWords + producer.tile_count(); }

// Split-K (the CUDA conv pair) and stream-K (the Hopper MLP in stream order,
// with a tile's segments as its shares) extend the buffer: after the semaphores, one
// count per producer tile and per consumer tile (zeroed with them), then, at
// a 16-byte boundary and not zeroed (a share's sums are read only after it
// has written them and counted them), the fp32 partial sums: splits accumulator tiles of
// tile_rows x tile_cols per output tile of each stage. The placed fused
// schedule (placed_schedule.h) adds one flag per tile of both stages, zeroed,
// before the partial sums. Offsets are in 32-bit words.
struct SplitLayout {
  long long counts1, counts2;      // split counts of the producer's and the consumer's tiles
  long long flags;                 // the placed schedule's position flags (0: none)
  long long partials1, partials2;  // their partial sums (floats)
  long long zeroed;                // words zeroed per call: everything before the partial sums
  long long words;                 // the whole buffer
};

CUSYNC_HD SplitLayout split_layout(const Stage& producer, const Stage& consumer, int splits1, int splits2,
                                   bool placed = false) {
  SplitLayout l{};
  const long long p = producer.tile_count(), c = consumer.tile_count();
  const bool split = splits1 > 1 || splits2 > 1;
  long long end = sync_words(producer);
  if (split) {
    l.counts1 = end;
    l.counts2 = l.counts1 + p;
    end = l.counts2 + c;
  }
  if (placed) {
    l.flags = end;
    end += p + c;
  }
  l.zeroed = end;
  if (!split) {
    l.words = l.zeroed;
    return l;
  }
  l.partials1 = (l.zeroed + 3) / 4 * 4;
  l.partials2 = l.partials1 + splits1 * p * producer.tile_rows * producer.tile_cols;
  l.words = l.partials2 + splits2 * c * consumer.tile_rows * consumer.tile_cols;
  return l;
}

// Words the MLP's CUDA handler and the Hopper conv pair's zero before a
// call's launches: none for a serial call without split-K or stream-K, whose
// launches take static schedules and read no word of the buffer; everything
// before the partial sums otherwise.
CUSYNC_HD long long words_to_zero(const SplitLayout& l, bool serial, bool split) {
  return serial && !split ? 0 : l.zeroed;
}

// A conv stage split along k on the Hopper kernel: stream-K over tiles x
// splits CTAs, so an even split of every tile where splits divides its
// k-blocks.
CUSYNC_HD StreamK conv_stream_k(const Stage& st, int k_blocks, int splits) {
  return make_stream_k(st.grid_rows(), st.grid_cols(), k_blocks, st.tile_count() * splits);
}

// The conv pair's buffer: a split stage's tiles get `splits` slots each on
// the CUDA conv kernel, and on the Hopper kernel (stream_k) as many as the
// stream-K ranges one tile can meet; placed: the Hopper fused kernel's
// placed schedule flags.
CUSYNC_HD SplitLayout conv_split_layout(const Stage& producer, const Stage& consumer, int k_blocks1, int k_blocks2,
                                        int splits1, int splits2, bool stream_k, bool placed = false) {
  const auto slots = [&](const Stage& st, int k_blocks, int splits) {
    return stream_k && splits > 1 ? conv_stream_k(st, k_blocks, splits).max_segments() : splits;
  };
  return split_layout(producer, consumer, slots(producer, k_blocks1, splits1), slots(consumer, k_blocks2, splits2),
                      placed);
}

}  // namespace cusync
