// The hidden `--call-loop=KIND --target=ADDR --calls=N` mode of
// tensord-bench: one client makes N small calls of one kind, back to back,
// for an instruction count under callgrind (scripts/count-small-call-
// instructions.sh), which the machine's noise cannot move. Kinds: `empty`
// and `payload` (the empty call and the 4 KiB answer, against
// --serve-empty), `stat` and `fetch` (of the 4 KiB tensor bench/small/4096),
// `put` (stores that tensor once), `put-cache` (N cache-retention puts of
// one name).
#ifndef TENSORD_BENCH_CALL_LOOP_H_
#define TENSORD_BENCH_CALL_LOOP_H_

#include <cstdint>
#include <string>

namespace tensord::bench {

// Returns the process exit code. Connects, makes 300 warm-up calls, then
// the N: the script counts two runs with different N and takes the
// difference, so start-up, connecting and warm-up cancel.
int RunCallLoop(const std::string& kind, const std::string& target, uint64_t calls);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_CALL_LOOP_H_
