#pragma once

namespace tensord {

// Runs, once per process, the lazy initialisations inside Abseil that can
// leave errno set to ENOENT as a side effect, so that they never run inside
// gRPC's TCP connect.
//
// Why: gRPC 1.51 (Debian bookworm's) reads errno after connect() only once
// it has locked mutexes and named the fd (fixed upstream in grpc/grpc#35064).
// The first absl::Mutex in a process that has to block measures the CPU's
// frequency and opens /sys/devices/system/cpu/cpu0/tsc_freq_khz, which most
// machines lack; when that first block falls in the connect window, the
// connect fails with "No such file or directory" and the call with
// UNAVAILABLE ("failed to connect to all addresses") although the server is
// up. Call this before creating a gRPC channel; it costs a few microseconds
// the first time and nothing after.
void MakeGrpcConnectsErrnoSafe();

}  // namespace tensord
