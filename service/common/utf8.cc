#include "service/common/utf8.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tensord {

bool IsValidUtf8(std::span<const uint8_t> text) {
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    // ASCII eight bytes at a time: names and messages are nearly always
    // ASCII, and every string of every parsed answer passes through here.
    while (size - i >= 8) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, sizeof word);
      if ((word & 0x8080808080808080ull) != 0) break;
      i += 8;
    }
    if (i == size) break;
    const uint8_t lead = text[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range its second byte may take
    // (narrower than 80..BF where that rules out overlong forms,
    // surrogates or code points past U+10FFFF).
    size_t length = 0;
    uint8_t second_low = 0x80;
    uint8_t second_high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_low = 0xA0;
      if (lead == 0xED) second_high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_low = 0x90;
      if (lead == 0xF4) second_high = 0x8F;
    } else {
      return false;
    }
    if (size - i < length) return false;
    if (text[i + 1] < second_low || text[i + 1] > second_high) return false;
    for (size_t k = 2; k < length; ++k) {
      if (text[i + k] < 0x80 || text[i + k] > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace tensord
