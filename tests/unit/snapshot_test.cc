// The snapshot format (round trip, and every kind of damage refused) and
// SnapshotStore (write, restore, the corrupt-snapshot policies).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "service/registry/registry.h"
#include "service/snapshot/snapshot_format.h"
#include "service/snapshot/snapshot_store.h"

namespace tensord {
namespace {

// A snapshot file in memory: the encoded prefix, then each tensor's bytes.
std::string BuildFile(std::vector<SnapshotEntry>& entries, const std::vector<std::string>& data,
                      uint64_t next_version = 100) {
  std::string file = EncodeSnapshotPrefix(entries, next_version);
  for (size_t i = 0; i < entries.size(); ++i) {
    file.resize(entries[i].data_offset, '\0');
    file += data[i];
  }
  return file;
}

SnapshotEntry Entry(std::string name, uint64_t version, const std::string& bytes) {
  SnapshotEntry entry;
  entry.name = std::move(name);
  entry.version = version;
  entry.created_unix_nanos = 1'700'000'000'000'000'000 + static_cast<int64_t>(version);
  entry.layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  entry.layout.shape = {static_cast<int64_t>(bytes.size())};
  entry.total_bytes = bytes.size();
  entry.crc32c = Crc32c(bytes.data(), bytes.size());
  return entry;
}

struct SampleSnapshot {
  std::vector<SnapshotEntry> entries;
  std::vector<std::string> data;
  std::string file;
};

SampleSnapshot Sample() {
  SampleSnapshot sample;
  sample.data = {std::string(100, 'a'), std::string(), std::string(24, 'c')};
  sample.entries = {Entry("w/a", 3, sample.data[0]), Entry("w/empty", 5, sample.data[1]),
                    Entry("w/c", 9, sample.data[2])};
  // A strided float32 [2, 3] view: column-major strides over the 24 bytes.
  sample.entries[2].layout.dtype = DLDataType{dlpack::kFloat, 32, 1};
  sample.entries[2].layout.shape = {2, 3};
  sample.entries[2].layout.strides = {1, 2};
  sample.entries[2].retention = Retention::kPinned;
  sample.file = BuildFile(sample.entries, sample.data);
  return sample;
}

absl::string_view View(const std::string& file) {
  return absl::string_view(file.data(), file.size());
}

TEST(SnapshotFormatTest, RoundTripsEntries) {
  SampleSnapshot sample = Sample();
  absl::StatusOr<SnapshotContents> parsed = ParseSnapshot(View(sample.file));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->next_version, 100u);
  ASSERT_EQ(parsed->entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const SnapshotEntry& got = parsed->entries[i];
    const SnapshotEntry& want = sample.entries[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.version, want.version);
    EXPECT_EQ(got.created_unix_nanos, want.created_unix_nanos);
    EXPECT_EQ(got.retention, want.retention);
    EXPECT_TRUE(got.layout == want.layout) << got.name;
    EXPECT_EQ(got.data_offset % kSnapshotDataAlignment, 0u);
    EXPECT_EQ(got.total_bytes, want.total_bytes);
    EXPECT_TRUE(VerifySnapshotEntry(View(sample.file), got).ok());
  }
  std::vector<SnapshotEntry> none;
  std::string empty = BuildFile(none, {});
  absl::StatusOr<SnapshotContents> parsed_empty = ParseSnapshot(View(empty));
  ASSERT_TRUE(parsed_empty.ok()) << parsed_empty.status();
  EXPECT_TRUE(parsed_empty->entries.empty());
}

TEST(SnapshotFormatTest, EveryTruncationIsRefused) {
  SampleSnapshot sample = Sample();
  for (size_t size = 0; size < sample.file.size(); ++size) {
    absl::StatusOr<SnapshotContents> parsed =
        ParseSnapshot(absl::string_view(sample.file.data(), size));
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << "size " << size;
  }
  std::string longer = sample.file + "x";
  EXPECT_EQ(ParseSnapshot(View(longer)).status().code(), absl::StatusCode::kDataLoss);
}

TEST(SnapshotFormatTest, FlippedHeaderOrManifestByteIsRefusedNamingTheChecksum) {
  SampleSnapshot sample = Sample();
  // Header and manifest; the alignment padding after them carries nothing.
  const size_t prefix_bytes = EncodeSnapshotPrefix(sample.entries, 100).size();
  for (size_t offset = 0; offset < prefix_bytes; ++offset) {
    std::string damaged = sample.file;
    damaged[offset] ^= 0x20;
    absl::StatusOr<SnapshotContents> parsed = ParseSnapshot(View(damaged));
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << "offset " << offset;
  }
  std::string damaged = sample.file;
  damaged[40] ^= 1;  // inside the manifest
  EXPECT_NE(ParseSnapshot(View(damaged)).status().message().find("manifest crc32c"),
            std::string::npos);
  damaged = sample.file;
  damaged[0] = 'X';
  EXPECT_NE(ParseSnapshot(View(damaged)).status().message().find("magic"), std::string::npos);
}

TEST(SnapshotFormatTest, FlippedDataByteFailsOnlyThatTensorsChecksum) {
  SampleSnapshot sample = Sample();
  std::string damaged = sample.file;
  damaged[sample.entries[2].data_offset + 5] ^= 0x01;
  absl::StatusOr<SnapshotContents> parsed = ParseSnapshot(View(damaged));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(VerifySnapshotEntry(View(damaged), parsed->entries[0]).ok());
  absl::Status bad = VerifySnapshotEntry(View(damaged), parsed->entries[2]);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.message().find("'w/c'"), std::string::npos) << bad;
}

// Records whose checksums are right but whose contents are not.
TEST(SnapshotFormatTest, ConsistentlyChecksummedBadRecordsAreRefused) {
  struct Case {
    const char* what;
    void (*damage)(std::vector<SnapshotEntry>&);
    const char* message;
  };
  const Case cases[] = {
      {"duplicate name", [](std::vector<SnapshotEntry>& e) { e[1].name = e[0].name; },
       "appears twice"},
      {"bad name", [](std::vector<SnapshotEntry>& e) { e[0].name = "../escape"; }, "../escape"},
      {"cache retention", [](std::vector<SnapshotEntry>& e) { e[0].retention = Retention::kCache; },
       "retention 2"},
      {"size mismatch", [](std::vector<SnapshotEntry>& e) { e[0].layout.shape = {99}; },
       "needs 99"},
      {"version 0", [](std::vector<SnapshotEntry>& e) { e[0].version = 0; }, "version 0"},
      {"device",
       [](std::vector<SnapshotEntry>& e) {
         e[0].layout.device = DLDevice{kDLCUDA, 0};
       },
       "device {type 2"},
  };
  for (const Case& c : cases) {
    SampleSnapshot sample = Sample();
    c.damage(sample.entries);
    std::string file = BuildFile(sample.entries, sample.data);
    absl::Status status = ParseSnapshot(View(file)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << c.what;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << c.what << ": " << status;
  }
  SampleSnapshot sample = Sample();  // highest version 9
  std::string file = BuildFile(sample.entries, sample.data, /*next_version=*/9);
  absl::Status status = ParseSnapshot(View(file)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("not below the header's next version 9"), std::string::npos)
      << status;
}

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tensord-snapshot-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    directory_ = pattern;
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(directory_);
  }

  void Open() {
    absl::StatusOr<std::unique_ptr<SnapshotStore>> opened = SnapshotStore::Open(directory_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  // Files in the directory whose names start with `prefix`.
  std::vector<std::string> FilesStartingWith(const std::string& prefix) const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(directory_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    return names;
  }

  static absl::StatusOr<VersionInfo> Put(Registry& registry, const std::string& name,
                                         const std::string& bytes, Retention retention) {
    dlpack::TensorLayout layout;
    layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
    layout.shape = {static_cast<int64_t>(bytes.size())};
    absl::StatusOr<PendingVersion> pending =
        registry.Prepare(name, layout, bytes.size(), retention);
    if (!pending.ok()) return pending.status();
    if (!bytes.empty()) {
      EXPECT_TRUE(pending->buffer->Write(0, bytes.data(), bytes.size()).ok());
    }
    return registry.Publish(std::move(*pending));
  }

  static std::string BytesOf(const Registry& registry, const std::string& name) {
    absl::StatusOr<Lease> lease = registry.Acquire(name, 0);
    if (!lease.ok()) return "<" + lease.status().ToString() + ">";
    return std::string(reinterpret_cast<const char*>((*lease)->buffer->data()),
                       (*lease)->total_bytes);
  }

  // A snapshot of three durable tensors and one cache tensor.
  void WriteSample(SnapshotStore& store) {
    Registry registry(RegistryOptions{});
    ASSERT_TRUE(Put(registry, "keep/default", std::string(5000, 'd'), Retention::kDefault).ok());
    ASSERT_TRUE(Put(registry, "keep/pinned", "pinned bytes", Retention::kPinned).ok());
    ASSERT_TRUE(Put(registry, "drop/cache", "cache bytes", Retention::kCache).ok());
    ASSERT_TRUE(Put(registry, "keep/empty", "", Retention::kDefault).ok());
    versions_ = {registry.Stat("keep/default", 0)->version,
                 registry.Stat("keep/pinned", 0)->version, registry.Stat("keep/empty", 0)->version};
    absl::StatusOr<SnapshotSummary> written = store.Write(registry);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(written->tensor_count, 3u);
    EXPECT_EQ(written->total_bytes, 5000u + 12u);
  }

  std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  std::string directory_;
  std::unique_ptr<SnapshotStore> store_;
  std::vector<uint64_t> versions_;
};

TEST_F(SnapshotStoreTest, RestoresDurableTensorsWithTheirVersionsAndSkipsCache) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  WriteSample(store);
  EXPECT_TRUE(FilesStartingWith("tensord.snapshot.tmp.").empty());
  Registry restored(RegistryOptions{});
  absl::StatusOr<RestoreSummary> summary = store.Restore(restored, CorruptSnapshotPolicy::kRefuse);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->found);
  EXPECT_EQ(summary->restored, 3u);
  EXPECT_EQ(summary->corrupt, 0u);
  EXPECT_EQ(BytesOf(restored, "keep/default"), std::string(5000, 'd'));
  EXPECT_EQ(BytesOf(restored, "keep/pinned"), "pinned bytes");
  EXPECT_EQ(BytesOf(restored, "keep/empty"), "");
  EXPECT_EQ(restored.Stat("keep/default", 0)->version, versions_[0]);
  EXPECT_EQ(restored.Stat("keep/pinned", 0)->version, versions_[1]);
  EXPECT_EQ(restored.Stat("keep/pinned", 0)->retention, Retention::kPinned);
  EXPECT_EQ(restored.Stat("drop/cache", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SnapshotStoreTest, MissingSnapshotRestoresNothingAndCrashLeftoversAreRemoved) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  const std::string leftover = store.snapshot_path() + ".tmp.999999";
  WriteFile(leftover, "half a snapshot");
  WriteFile(directory_ + "/unrelated", "kept");
  Registry registry(RegistryOptions{});
  absl::StatusOr<RestoreSummary> summary = store.Restore(registry, CorruptSnapshotPolicy::kRefuse);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->found);
  EXPECT_EQ(registry.tensor_count(), 0u);
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_TRUE(std::filesystem::exists(directory_ + "/unrelated"));
}

TEST_F(SnapshotStoreTest, DamagedTensorRefusesEverythingOrLoadsTheRestAndSetsTheFileAside) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  WriteSample(store);
  std::string file = ReadFile(store.snapshot_path());
  absl::StatusOr<SnapshotContents> contents = ParseSnapshot(View(file));
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->entries[0].name, "keep/default");
  file[contents->entries[0].data_offset + 4000] ^= 0x10;
  WriteFile(store.snapshot_path(), file);

  Registry refused(RegistryOptions{});
  absl::StatusOr<RestoreSummary> summary = store.Restore(refused, CorruptSnapshotPolicy::kRefuse);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(summary.status().message().find("keep/default"), std::string::npos) << summary.status();
  EXPECT_NE(summary.status().message().find(store.snapshot_path()), std::string::npos);
  EXPECT_EQ(refused.tensor_count(), 0u);  // nothing half-loaded

  Registry partial(RegistryOptions{});
  summary = store.Restore(partial, CorruptSnapshotPolicy::kLoadValid);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->restored, 2u);
  EXPECT_EQ(summary->corrupt, 1u);
  EXPECT_EQ(partial.Stat("keep/default", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(BytesOf(partial, "keep/pinned"), "pinned bytes");
  EXPECT_FALSE(std::filesystem::exists(store.snapshot_path()));
  EXPECT_EQ(ReadFile(store.snapshot_path() + ".corrupt"), file);
}

TEST_F(SnapshotStoreTest, TruncatedSnapshotIsRefusedWhole) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  WriteSample(store);
  std::string file = ReadFile(store.snapshot_path());
  WriteFile(store.snapshot_path(), file.substr(0, file.size() - 100));
  Registry registry(RegistryOptions{});
  absl::StatusOr<RestoreSummary> summary = store.Restore(registry, CorruptSnapshotPolicy::kRefuse);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(registry.tensor_count(), 0u);
  summary = store.Restore(registry, CorruptSnapshotPolicy::kLoadValid);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->restored, 0u);
  EXPECT_EQ(summary->corrupt, 1u);
  EXPECT_TRUE(std::filesystem::exists(store.snapshot_path() + ".corrupt"));
}

TEST_F(SnapshotStoreTest, NewSnapshotReplacesTheOld) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  WriteSample(store);
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(Put(registry, "only/one", "x", Retention::kDefault).ok());
  ASSERT_TRUE(store.Write(registry).ok());
  Registry restored(RegistryOptions{});
  absl::StatusOr<RestoreSummary> summary = store.Restore(restored, CorruptSnapshotPolicy::kRefuse);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->restored, 1u);
  EXPECT_EQ(BytesOf(restored, "only/one"), "x");
}

TEST_F(SnapshotStoreTest, VersionsAfterRestoreNumberOnFromTheHighestEverIssued) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(Put(registry, "keep", "k", Retention::kDefault).ok());
  ASSERT_TRUE(Put(registry, "gone", "g", Retention::kDefault).ok());
  absl::StatusOr<VersionInfo> cached = Put(registry, "cached", "c", Retention::kCache);
  ASSERT_TRUE(cached.ok());
  absl::StatusOr<uint64_t> deleted = registry.Delete("gone", 0);
  ASSERT_TRUE(deleted.ok());
  const uint64_t highest_issued = std::max(*deleted, cached->version);
  ASSERT_TRUE(store.Write(registry).ok());

  Registry restored(RegistryOptions{});
  ASSERT_TRUE(store.Restore(restored, CorruptSnapshotPolicy::kRefuse).ok());
  absl::StatusOr<VersionInfo> next = Put(restored, "new", "n", Retention::kDefault);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(next->version, highest_issued);
}

// Limits lowered between runs: the default policy refuses before publishing
// anything, naming the numbers; ignoring loads what fits.
TEST_F(SnapshotStoreTest, SnapshotBeyondTheLimitsIsRefusedWholeOrLoadedAsFarAsItFits) {
  ASSERT_NO_FATAL_FAILURE(Open());
  SnapshotStore& store = *store_;
  WriteSample(store);  // 3 tensors, 5012 bytes
  for (RegistryOptions options :
       {RegistryOptions{.max_host_bytes = 4096}, RegistryOptions{.max_tensors = 2}}) {
    Registry refused(options);
    absl::StatusOr<RestoreSummary> summary = store.Restore(refused, CorruptSnapshotPolicy::kRefuse);
    EXPECT_EQ(summary.status().code(), absl::StatusCode::kResourceExhausted) << summary.status();
    EXPECT_NE(summary.status().message().find("5012 bytes"), std::string::npos) << summary.status();
    EXPECT_NE(summary.status().message().find("3 tensors"), std::string::npos) << summary.status();
    EXPECT_EQ(refused.tensor_count(), 0u);  // checked before the first publish

    Registry partial(options);
    summary = store.Restore(partial, CorruptSnapshotPolicy::kLoadValid);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->restored, 2u);
    EXPECT_EQ(summary->skipped, 1u);
    EXPECT_EQ(partial.tensor_count(), 2u);
    EXPECT_TRUE(std::filesystem::exists(store.snapshot_path()));  // not damaged: kept
  }
}

TEST_F(SnapshotStoreTest, OneStorePerDirectoryAtATime) {
  ASSERT_NO_FATAL_FAILURE(Open());
  absl::StatusOr<std::unique_ptr<SnapshotStore>> second = SnapshotStore::Open(directory_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(directory_ + " is in use"), std::string::npos)
      << second.status();
  // A leftover temporary of another name is not touched by a write.
  const std::string other = directory_ + "/tensord.snapshot.tmp.other";
  WriteFile(other, "not ours");
  ASSERT_NO_FATAL_FAILURE(WriteSample(*store_));
  EXPECT_EQ(ReadFile(other), "not ours");
  store_.reset();  // releases the lock
  ASSERT_NO_FATAL_FAILURE(Open());
}

}  // namespace
}  // namespace tensord
