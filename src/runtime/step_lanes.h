// Step lanes: which of a plan's steps may run at the same time, and on which of a few streams.
//
// A plan's steps are listed in an order that runs them one after another. Many need not wait for
// their predecessors: in DIN the user's sequence, the candidates' lookups and the user's profile
// are independent chains. A step must follow an earlier one only when they touch the same bytes
// and one of them writes (it reads what the other wrote, or overwrites what the other reads or
// writes; the plan reuses a value's room once its last reader ran), or when both use a buffer the
// executor shares among steps of a kind (cuBLASLt's workspace, say: `exclusive`).
//
// ScheduleLanes assigns each step a lane (a stream; lane 0 is the one the run starts and ends on)
// and the steps of other lanes it must wait for, keeping program order within a lane. A step
// continues the lane of a step it depends on where that step is the lane's last (or the lane's
// last is the step just before it: a hop between streams costs more than one needless wait), and
// otherwise opens a new lane while fewer than `max_lanes` are open, so chains run side by side
// and joins cost one wait each. Waits already implied by earlier ones are left out.
#pragma once

#include <cstdint>
#include <vector>

namespace rankd {

class Plan;

// Bytes [begin, end) of one of the executor's buffers (`space`: 0 is the plan's workspace; an
// executor numbers its own buffers from 1).
struct ByteRange {
  int space = 0;
  int64_t begin = 0, end = 0;
};

struct StepAccess {
  std::vector<ByteRange> reads, writes;
  bool exclusive = false;  // uses a buffer every exclusive step shares: runs after all earlier ones
};

// What each step of `plan` reads and writes in its workspace: its inputs' and outputs' bytes (an
// alias's are its root's) and its scratch. Graph inputs and constants are never written by a step
// and are left out.
std::vector<StepAccess> WorkspaceAccesses(const Plan& plan);

struct LaneSchedule {
  std::vector<int> lane;                // per step
  std::vector<std::vector<int>> waits;  // per step: earlier steps on other lanes to wait for
  int lanes = 1;                        // lanes used
};

LaneSchedule ScheduleLanes(const std::vector<StepAccess>& steps, int max_lanes);

// Whether steps a and b (a < b) must keep their order: they touch the same bytes and one writes,
// or both are exclusive.
bool MustFollow(const StepAccess& a, const StepAccess& b);

// Whether the schedule runs step `after` only once step `before` has finished: the same lane, or a
// chain of waits and lane order leading from one to the other.
bool RunsAfter(const LaneSchedule& schedule, int before, int after);

}  // namespace rankd
