// Layout of a call's sync buffer: the int32 words that hold its tile counters
// and semaphores. The buffer is an output of the op (so XLA owns it, it is
// distinct for every call in flight) and is zeroed on the stream at the start
// of every call.
#pragma once

#include "defs.h"
#include "policy.h"
#include "stage.h"

namespace cusync {

enum SyncWord : int {
  kProducerCounter = 0,  // next producer schedule position (streams mode)
  kConsumerCounter = 1,  // next consumer schedule position (streams mode)
  kFusedCounter = 2,     // next position of the fused producer-then-consumer schedule
  kProducerStarted = 3,  // set by the first producer block; the wait kernel spins on it
  kSyncHeaderWords = 8,  // semaphores start here
};

// Words a call needs: the header plus one semaphore per producer tile, which
// bounds every policy's semaphore count.
CUSYNC_HD int sync_words(const Stage& producer) { return kSyncHeaderWords + producer.tile_count(); }

}  // namespace cusync
