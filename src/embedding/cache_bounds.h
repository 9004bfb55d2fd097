// What any cache of `capacity` rows could hit on an access trace, to judge a policy by:
//
// - Belady's optimum (BeladyHits): starting empty, on a miss evict the cached key used again
//   furthest in the future, or skip caching the missed key when it is used again later than all of
//   them. No policy that starts empty and knows only the past hits more.
// - The static oracle (StaticOracleHits): the `capacity` keys most accessed over the whole trace,
//   loaded before it starts and never changed (a pre-loaded hot set, as HPS builds from a trained
//   model's statistics). On a trace whose hot set moves a dynamic policy can beat it.
#pragma once

#include <cstdint>
#include <span>

namespace rankd {

int64_t BeladyHits(std::span<const uint64_t> trace, int64_t capacity);
int64_t StaticOracleHits(std::span<const uint64_t> trace, int64_t capacity);

}  // namespace rankd
