// get NAME -o FILE.npy and get-raw NAME -o FILE: fetch a tensor into a file.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/npy_output.h"
#include "client/tensorctl/output_file.h"
#include "client/tensorctl/progress_bar.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/absl_view.h"
#include "service/common/byte_size.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/dlpack/tensor_layout.h"
#include "service/formats/npy.h"

namespace tensord::tensorctl {
namespace {

// The summary goes to stderr when the data itself goes to stdout.
FILE* SummaryStream(const OutputFile& output) { return output.is_stdout() ? stderr : stdout; }

// Bytes per ranged fetch when a get streams to its file.
constexpr uint64_t kGetPieceBytes = uint64_t{16} << 20;

// True when the stored bytes are the tensor in C order, as .npy wants them.
bool StoredInCOrder(const TensorInfo& info) {
  const dlpack::TensorLayout layout{info.dtype, info.shape, info.strides, info.byte_offset, {}};
  return info.byte_offset == 0 && dlpack::IsCompact(layout);
}

// Writes the bytes of version `stat` to `output` as they arrive, in ranged
// fetches of one reused piece: no buffer of the whole tensor (new memory
// the size of the tensor was a third of a 256 MiB get). Checked against the
// server's CRC-32C before the caller commits the file.
absl::Status StreamToFile(Client& client, const std::string& name, const TensorInfo& stat,
                          OutputFile& output, const ProgressCallback& progress) {
  FetchOptions options;
  options.version = stat.version;  // every range of the same version
  options.device_to_host = true;
  std::string piece;
  uint32_t crc = 0;
  for (uint64_t offset = 0; offset < stat.total_bytes;) {
    const uint64_t length = std::min(kGetPieceBytes, stat.total_bytes - offset);
    piece.clear();
    TENSORD_RETURN_IF_ERROR(client.FetchBytes(name, offset, length, piece, options).status());
    if (piece.size() != length) {
      return absl::DataLossError(absl::StrCat("fetch of bytes [", offset, ", +", length, ") of '",
                                              name, "' returned ", piece.size()));
    }
    crc = Crc32cExtend(crc, piece.data(), piece.size());
    TENSORD_RETURN_IF_ERROR(output.Write(piece));
    offset += length;
    progress(offset, stat.total_bytes);
  }
  if (crc != stat.crc32c) {
    return absl::DataLossError(absl::StrCat("fetched bytes of '", name, "' have crc32c ", crc,
                                            "; the server stored ", stat.crc32c));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunGet(Client& client, const Invocation& invocation) {
  const std::string& name = invocation.arguments[0];
  const uint64_t version = invocation.Number(kVersionOption);
  // Checked before any data moves, so a large bfloat16 tensor fails at once.
  // The header is made again from what Fetch returns, in case a new version
  // came in between.
  TENSORD_ASSIGN_OR_RETURN(TensorInfo stat, client.Stat(name, version));
  TENSORD_RETURN_IF_ERROR(NpyHeaderFor(name, stat).status());
  // Created before the fetch so an unwritable path fails before any data moves.
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> output,
                           OutputFile::Create(invocation.Text(kOutputOption)));

  ProgressBar progress(absl::StrCat("get ", name));
  // Standard output takes nothing before the whole tensor is checked, so it
  // gets the one-fetch path below.
  if (StoredInCOrder(stat) && !invocation.Has(kStreamsOption) && !output->is_stdout()) {
    TENSORD_ASSIGN_OR_RETURN(std::string header, NpyHeaderFor(name, stat));
    TENSORD_RETURN_IF_ERROR(output->Write(header));
    absl::Status streamed = StreamToFile(client, name, stat, *output, progress.Callback());
    // The ranges hold no lease between them: the latest version may be
    // replaced and dropped midway. Then the one-fetch path below, which
    // holds its version to the end, into a new temporary file.
    if (streamed.code() == absl::StatusCode::kNotFound && version == 0) {
      output.reset();  // removes the partial temporary
      TENSORD_ASSIGN_OR_RETURN(output, OutputFile::Create(invocation.Text(kOutputOption)));
    } else {
      TENSORD_RETURN_IF_ERROR(streamed);
      progress.Finish();
      TENSORD_RETURN_IF_ERROR(output->Commit());
      absl::FPrintF(SummaryStream(*output), "get %s version %d: %s %s -> %s\n", name, stat.version,
                    DescribeTensor(stat), FormatByteSize(stat.total_bytes),
                    AsAbsl(output->display_path()));
      return absl::OkStatus();
    }
  }
  FetchOptions options;
  options.version = version;
  options.verify_crc32c = true;
  // The bytes are written from this process: a device tensor must come as
  // a host copy, not as an import of the server's device memory.
  options.device_to_host = true;
  options.progress = progress.Callback();
  TENSORD_ASSIGN_OR_RETURN(options.streams, StreamsOption(invocation));
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name, options));
  progress.Finish();

  TENSORD_ASSIGN_OR_RETURN(std::string header, NpyHeaderFor(name, tensor.info()));
  TENSORD_RETURN_IF_ERROR(output->Write(header));
  TENSORD_RETURN_IF_ERROR(WriteCompact(tensor, *output));
  TENSORD_RETURN_IF_ERROR(output->Commit());
  const TensorInfo& info = tensor.info();
  absl::FPrintF(SummaryStream(*output), "get %s version %d: %s %s -> %s\n", name, info.version,
                DescribeTensor(info), FormatByteSize(info.total_bytes),
                AsAbsl(output->display_path()));
  return absl::OkStatus();
}

absl::Status RunGetRaw(Client& client, const Invocation& invocation) {
  const std::string& name = invocation.arguments[0];
  const uint64_t offset = invocation.Number(kOffsetOption);
  const uint64_t length = invocation.Number(kLengthOption);
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> output,
                           OutputFile::Create(invocation.Text(kOutputOption)));

  ProgressBar progress(absl::StrCat("get-raw ", name));
  FetchOptions options;
  options.version = invocation.Number(kVersionOption);
  // The server's CRC-32C covers all stored bytes, so only a whole read can
  // be checked against it.
  options.verify_crc32c = offset == 0 && length == 0;
  options.progress = progress.Callback();
  std::string bytes;
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info,
                           client.FetchBytes(name, offset, length, bytes, options));
  progress.Finish();

  TENSORD_RETURN_IF_ERROR(output->Write(bytes));
  TENSORD_RETURN_IF_ERROR(output->Commit());
  absl::FPrintF(SummaryStream(*output), "get-raw %s version %d: bytes [%d, %d) of %d, %s -> %s\n",
                name, info.version, offset, offset + bytes.size(), info.total_bytes,
                FormatByteSize(bytes.size()), AsAbsl(output->display_path()));
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
